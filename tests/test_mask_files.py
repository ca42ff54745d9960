"""--mask-files: the secrets a block printed are masked in the files the run keeps (the CI artifact), not only in its reports."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci.base.text import Masker
from ci.runner.masking import mask_file, mask_output_files, masking_lines

FENCE = "```"
SECRET = "hf_s3cr3t_value_123"
BOUNDARY = 1024 * 1024  # the masking reads 1 MiB at a time
# a few MB written by a block: the secret straddles the first read boundary, bytes not UTF-8 on each side
BIG = (
    "import os, sys\n"
    "secret = os.environ['HF_TOKEN'].encode()\n"
    f"sys.stdout.buffer.write(b'a' * ({BOUNDARY} - 6) + b'\\xff' + secret + b'\\xfe' + b'b' * 2000000)\n"
)
GUIDE = f"""
    ---
    ci:
      collect: ["server.log"]
    ---
    {FENCE}shell #test-setup id="clean"
    echo "nothing to hide"
    {FENCE}

    {FENCE}shell #test-setup id="leak"
    env | grep HF_TOKEN
    printf '\\377%s\\376\\n' "$HF_TOKEN" >&2
    nohup sh -c 'echo "server started with $HF_TOKEN" >> server.log; exec sleep 60' >/dev/null 2>&1 &
    while ! test -s server.log; do sleep 0.02; done
    {FENCE}

    {FENCE}shell #test-setup id="big"
    {sys.executable} big.py
    {FENCE}

    {FENCE}shell #test-setup id="look"
    stat -c '%n %i %.9Y %a' out/blocks/001-clean.stdout.txt out/blocks/002-leak.stdout.txt > stat.txt
    chmod 600 out/blocks/002-leak.stdout.txt
    {FENCE}
    """


def _stat(tmp_path: Path) -> dict[str, list[str]]:
    """What the last block saw of the files before the masking: name -> inode, mtime, mode."""
    lines = (tmp_path / "stat.txt").read_text().splitlines()
    return {Path(line.split()[0]).name: line.split()[1:] for line in lines}


def _now(path: Path) -> list[str]:
    status = path.stat()
    return [str(status.st_ino), f"{status.st_mtime_ns // 10**9}.{status.st_mtime_ns % 10**9:09d}"]


def test_every_file_the_run_keeps_is_masked_with_mask_files(guide_runner, tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text(BIG, encoding="utf-8")
    run = guide_runner(GUIDE, "--mask-files", env={"HF_TOKEN": SECRET})
    assert run.returncode == 0, run.stdout + run.stderr
    blocks = run.output_dir / "blocks"
    kept = [path for path in run.output_dir.rglob("*") if path.is_file() and path.name != "results.json"]
    assert not [path for path in kept if SECRET.encode() in path.read_bytes()]
    assert (blocks / "002-leak.stdout.txt").read_bytes() == b"HF_TOKEN=***\n"
    assert (blocks / "002-leak.stderr.txt").read_bytes() == b"\xff***\xfe\n"  # the bytes not UTF-8 kept
    assert (run.output_dir / "collected" / str(tmp_path / "server.log").lstrip("/")).read_bytes() == (
        b"server started with ***\n"
    )
    big = (blocks / "003-big.stdout.txt").read_bytes()
    assert big == b"a" * (BOUNDARY - 6) + b"\xff***\xfe" + b"b" * 2000000
    seen = _stat(tmp_path)
    # a file without a secret is not rewritten; one with is replaced, keeping its mode
    assert _now(blocks / "001-clean.stdout.txt") == seen["001-clean.stdout.txt"][:2]
    assert _now(blocks / "002-leak.stdout.txt")[0] != seen["002-leak.stdout.txt"][0]
    assert (blocks / "002-leak.stdout.txt").stat().st_mode & 0o777 == 0o600
    assert f"masked secrets in 4 files under {run.output_dir} (--mask-files)" in run.stdout.splitlines()[-1]
    assert SECRET not in run.stdout + run.stderr
    # results.json keeps the sizes the blocks wrote
    record = json.loads((run.output_dir / "results.json").read_text())
    assert record["blocks"][1]["stdout_bytes"] == len(f"HF_TOKEN={SECRET}\n")


def test_without_mask_files_the_files_keep_what_was_printed(guide_runner, tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text(BIG, encoding="utf-8")
    run = guide_runner(GUIDE, env={"HF_TOKEN": SECRET})
    assert run.returncode == 0, run.stdout + run.stderr
    blocks = run.output_dir / "blocks"
    assert (blocks / "002-leak.stdout.txt").read_bytes() == f"HF_TOKEN={SECRET}\n".encode()
    assert SECRET.encode() in (blocks / "003-big.stdout.txt").read_bytes()
    assert "--mask-files" not in run.stdout and SECRET not in run.stdout


def test_no_line_when_no_file_held_a_secret(guide_runner) -> None:
    run = guide_runner(
        f'{FENCE}shell #test-setup id="quiet"\necho "nothing to hide"\n{FENCE}\n',
        "--mask-files",
        env={"HF_TOKEN": SECRET},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "masked secrets" not in run.stdout and "[ERROR]" not in run.stdout + run.stderr


def test_a_file_is_masked_as_the_log_is_across_every_read_boundary(tmp_path: Path) -> None:
    masker = Masker.of([SECRET, "p4ss-w\u00f6rd-\udcff", "with newline\r\n"])
    pieces = [*masker.secret_bytes, b"hf_s3cr3t", b"\xff\xfe", b"x", b"\n", b"\r\n", SECRET.encode()[5:], b"\0" * 30]
    chooser = random.Random(7)
    path = tmp_path / "out.txt"
    for _ in range(200):
        data = b"".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 40)))
        path.write_bytes(data)
        held = masker.mask_bytes(data) != data
        assert mask_file(path, masker, chunk_bytes=chooser.randint(1, 50)) is held
        assert path.read_bytes() == masker.mask_bytes(data)
    assert masker.mask_bytes(b"a p4ss-w\xc3\xb6rd-\xff b with newline\r\n") == b"a *** b ***\r\n"


def test_an_interrupted_run_masks_the_files_written_so_far(tmp_path: Path, harness_env: dict[str, str]) -> None:
    guide = tmp_path / "guide.md"
    ready = tmp_path / "ready"
    guide.write_text(
        f'{FENCE}shell #test-setup id="leak"\necho "token $HF_TOKEN"\ntouch {ready}\nsleep 60\n{FENCE}\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out), "--mask-files"],
        cwd=tmp_path,
        env={**harness_env, "HF_TOKEN": SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    until = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < until:
        time.sleep(0.02)
    harness.send_signal(signal.SIGTERM)
    stdout, stderr = harness.communicate(timeout=60)
    assert harness.returncode == 143, stdout + stderr
    assert (out / "blocks" / "001-leak.stdout.txt").read_bytes() == b"token ***\n"
    assert (out / "results.json").exists()
    assert f"masked secrets in 1 file under {out} (--mask-files)" in stdout
    assert not [name for name in os.listdir(out / "blocks") if name.endswith(".masking")]


def test_files_the_masking_had_no_time_for_are_left_whole_and_named(tmp_path: Path) -> None:
    blocks = tmp_path / "blocks"
    blocks.mkdir()
    (blocks / "001-leak.stdout.txt").write_text(f"token {SECRET}\n")
    masker = Masker.of([SECRET])
    done = mask_output_files(tmp_path, masker, lambda: time.monotonic() - 1)  # a stop whose time is up
    assert done.masked == [] and (blocks / "001-leak.stdout.txt").read_text() == f"token {SECRET}\n"
    said, error = masking_lines(done, tmp_path)
    assert said is None and error is not None
    assert (
        error.startswith("--mask-files: 1 file under ") and "blocks/001-leak.stdout.txt (the run was stopping" in error
    )
    assert os.listdir(blocks) == ["001-leak.stdout.txt"]  # no temporary file left


def test_update_from_a_masked_run_leaves_a_body_holding_a_masked_secret_alone(guide_runner, run_harness) -> None:
    guide = f"""
        {FENCE}shell #test id="echo"
        echo "token=$HF_TOKEN"
        {FENCE}

        {FENCE}shell #test-result id="echo"
        token=old
        {FENCE}

        {FENCE}shell #test id="plain"
        echo "new text"
        {FENCE}

        {FENCE}shell #test-result id="plain"
        old text
        {FENCE}
        """
    run = guide_runner(guide, "--mask-files", "--keep-going", env={"HF_TOKEN": SECRET})
    assert run.returncode == 1 and "masked secrets in 1 file" in run.stdout
    update = run_harness("--update", "--from-run", str(run.output_dir), str(run.guide), env={"HF_TOKEN": SECRET})
    assert update.returncode == 1, update.stdout + update.stderr  # an update left undone
    assert "the run's output file was masked (--mask-files)" in update.stderr
    text = run.guide.read_text()
    assert "token=old" in text and "new text" in text and "***" not in text


def test_a_sparse_file_stays_sparse_when_masked(tmp_path: Path) -> None:
    path = tmp_path / "huge.stdout.txt"
    with open(path, "wb") as handle:  # 64 MiB that take no room, the secret across the fourth read boundary
        handle.truncate(64 * BOUNDARY)
        handle.seek(4 * BOUNDARY - 7)
        handle.write(SECRET.encode())
    if path.stat().st_blocks * 512 >= BOUNDARY:
        pytest.skip("this file system does not keep holes")
    assert mask_file(path, Masker.of([SECRET])) is True
    assert path.stat().st_size == 64 * BOUNDARY - len(SECRET) + 3
    assert path.stat().st_blocks * 512 <= 4 * BOUNDARY  # the part around the secret, not 64 MiB of zeros
    with open(path, "rb") as handle:
        handle.seek(4 * BOUNDARY - 10)
        assert handle.read(8) == b"\0\0\0***\0\0"
