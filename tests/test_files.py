"""write_atomically: a file is replaced whole or left as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ci.core.files import write_atomically


def test_a_new_file_is_written_with_its_line_endings_as_given(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    write_atomically(path, "\ufeffone\r\ntwo\nthree")
    assert path.read_bytes() == "\ufeffone\r\ntwo\nthree".encode()
    assert os.listdir(tmp_path) == ["guide.md"]


def test_replacing_keeps_the_permission_bits(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("old\n")
    path.chmod(0o750)
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{}\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, '{"half": 1, "then": "\udc80"}', encoding="ascii")
    assert path.read_text() == "{}\n"
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_reader_sees_the_old_or_the_new_file_never_a_part(tmp_path: Path) -> None:
    path = tmp_path / "harness.pid"
    path.write_text("1\n")
    opened = path.open()  # a reader that had the file open before the write
    write_atomically(path, "2\n")
    assert opened.read() == "1\n"  # the old file, whole: the new one came under a new inode
    opened.close()
    assert path.read_text() == "2\n"
