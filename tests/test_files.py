"""write_atomically: a file is replaced whole or left as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ci.base.files import write_atomically


def test_a_new_file_is_written_with_its_line_endings_as_given(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    write_atomically(path, "\ufeffone\r\ntwo\nthree")
    assert path.read_bytes() == "\ufeffone\r\ntwo\nthree".encode()
    assert os.listdir(tmp_path) == ["guide.md"]


def test_updating_keeps_the_permission_bits(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("old\n")
    path.chmod(0o750)
    write_atomically(path, "new\n", updating=True)
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_a_report_takes_no_mode_from_what_stood_at_its_name(tmp_path: Path) -> None:
    """A report is the harness's own file: a set-user-ID file at its name lends it nothing."""
    path = tmp_path / "results.json"
    path.write_text("old\n")
    path.chmod(0o4755)
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()


def test_a_link_at_the_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    """The temporary beside the file has an unguessable name and is made new: a link planted there leads nowhere."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    directory = tmp_path / "out"
    directory.mkdir()
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (directory / f".results.json.{pid}.tmp").symlink_to(outside)
    write_atomically(directory / "results.json", "new\n")
    assert outside.read_text() == "keep\n"
    assert (directory / "results.json").read_text() == "new\n"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
