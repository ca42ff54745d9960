"""Files outside the output directory are never touched: links, FIFOs and other users' files planted in it, report
paths on the command line, ci.collect's links, a guide too large to be one (docs/guarantees.md, "Files and links")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

FENCE = "```"
NOBODY = 65534  # an unprivileged user that exists on every Linux system (nobody)


def _test(ident: str, command: str, expected: str) -> str:
    return f'{FENCE}shell #test id="{ident}"\n{command}\n{FENCE}\n\n{FENCE}shell #test-result id="{ident}"\n{expected}\n{FENCE}\n'


def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file or a link to another user, which this case needs")


def _outside(tmp_path: Path, text: str = "not the run's\n", mode: int = 0o644) -> Path:
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_links_planted_at_block_files_are_replaced_not_followed(tmp_path: Path, guide_runner) -> None:
    outside = _outside(tmp_path)
    elsewhere = tmp_path / "elsewhere-dir"
    elsewhere.mkdir()
    blocks = tmp_path / "out" / "blocks"
    blocks.mkdir(parents=True)
    (blocks / "001-a.stdout.txt").symlink_to(outside)
    (blocks / "001-a.stderr.txt").symlink_to(outside)
    (blocks / "001-a.diagnostics").symlink_to(elsewhere)
    guide = '---\nci:\n  diagnostics: ["echo diagnosed"]\n---\n\n' + _test("a", "echo one; echo err >&2", "two")
    run = guide_runner(guide)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.block("a")["status"] == "mismatch"
    assert outside.read_text() == "not the run's\n"
    assert list(elsewhere.iterdir()) == []
    stdout = blocks / "001-a.stdout.txt"
    assert not stdout.is_symlink() and stdout.read_text() == "one\n"
    assert (blocks / "001-a.stderr.txt").read_text() == "err\n"
    (diagnostic,) = (blocks / "001-a.diagnostics").iterdir()
    assert diagnostic.read_text() == "diagnosed\n"


def test_a_link_in_place_of_an_output_directory_is_replaced(tmp_path: Path, guide_runner) -> None:
    """`blocks/` and `collected/` planted as links to another directory: the run makes its own."""
    elsewhere = tmp_path / "elsewhere-dir"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "blocks").symlink_to(elsewhere)
    (out / "collected").symlink_to(elsewhere)
    guide = '---\nci:\n  collect: ["logs/*.log"]\n---\n\n' + _test(
        "a", "mkdir -p logs; echo kept > logs/x.log; echo one", "one"
    )
    run = guide_runner(guide)
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(elsewhere.iterdir()) == []
    assert (out / "blocks" / "001-a.stdout.txt").read_text() == "one\n"
    (copied,) = run.record["guides"][0]["collected"]["files"]
    assert (out / copied["copied_to"]).read_text() == "kept\n"
    assert not (out / "collected").is_symlink()


def test_a_fifo_at_a_block_output_neither_hangs_nor_is_opened(tmp_path: Path, guide_runner) -> None:
    """Opening a FIFO to write waits for a reader: the harness never opens what stood at a block's file."""
    blocks = tmp_path / "out" / "blocks"
    blocks.mkdir(parents=True)
    os.mkfifo(blocks / "001-a.stdout.txt")
    os.mkfifo(blocks / "001-a.stderr.txt")
    run = guide_runner(_test("a", "echo one", "one"), timeout_s=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert stat.S_ISREG((blocks / "001-a.stdout.txt").lstat().st_mode)


def test_results_json_takes_no_mode_from_a_planted_link(tmp_path: Path, guide_runner) -> None:
    """A link to a set-user-ID program at results.json: the record is a new file, the program is left as it was."""
    program = _outside(tmp_path, "#!/bin/sh\n", 0o4755)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(program)
    run = guide_runner(_test("a", "echo one", "one"))
    assert run.returncode == 0, run.stdout + run.stderr
    record = out / "results.json"
    assert not record.is_symlink()
    assert stat.S_IMODE(record.stat().st_mode) & 0o7000 == 0
    assert (program.read_text(), stat.S_IMODE(program.stat().st_mode)) == ("#!/bin/sh\n", 0o4755)


def test_results_json_of_another_user_becomes_the_runs_own(tmp_path: Path, guide_runner) -> None:
    _as_root()
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}\n")
    os.chown(out / "results.json", NOBODY, NOBODY)
    run = guide_runner(_test("a", "echo one", "one"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert (out / "results.json").stat().st_uid == os.geteuid()


def test_masked_rewrite_carries_no_set_user_id_bit(tmp_path: Path, guide_runner) -> None:
    """--mask-files rewrites a block's file holding a secret: its permissions are kept, a set-user-ID bit never."""
    guide = _test("a", 'echo "$MY_TOKEN"; chmod 4755 "/proc/$$/fd/1"', "...")
    run = guide_runner(guide, "--mask-files", env={"MY_TOKEN": "hunter2-secret"})
    assert run.returncode == 0, run.stdout + run.stderr
    stdout = run.output_dir / "blocks" / "001-a.stdout.txt"
    assert stdout.read_text() == "***\n"
    assert stat.S_IMODE(stdout.stat().st_mode) == 0o755


def test_a_link_in_place_of_the_runners_files_copies_is_replaced(tmp_path: Path, guide_runner) -> None:
    """`actions-files/` planted as a link to another directory (the runner's own, say): its files are not emptied."""
    outside = _outside(tmp_path, "earlier=kept\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "actions-files").symlink_to(outside.parent)
    (outside.parent / "GITHUB_OUTPUT").symlink_to(outside)
    runner_output = tmp_path / "runner-output"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(runner_output)}
    run = guide_runner(_test("a", 'echo forged=1 >> "$GITHUB_OUTPUT"; echo one', "one"), env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert outside.read_text() == "earlier=kept\n" and (outside.parent / "GITHUB_OUTPUT").is_symlink()
    assert not (out / "actions-files").is_symlink()
    assert (out / "actions-files" / "GITHUB_OUTPUT").read_text() == "forged=1\n"
    assert "forged" not in runner_output.read_text()


@pytest.mark.parametrize("place", ["blocks/001-a.stdout.txt", "actions-files/GITHUB_OUTPUT"])
def test_a_guide_among_the_runs_own_files_is_refused(tmp_path: Path, run_harness, place: str) -> None:
    guide = tmp_path / "out" / place
    guide.parent.mkdir(parents=True)
    guide.write_text(_test("a", "echo one", "one"))
    done = run_harness(
        str(guide), "--output-dir", "out", env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": "runner-output"}
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"is inside the output directory's {place.split('/')[0]}/, which the run replaces" in done.stderr
    assert guide.read_text() == _test("a", "echo one", "one")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--junit", "link.xml"], "--junit 'link.xml' is the guide"),  # a link to it
        (["--junit", "out/results.json"], "--junit 'out/results.json' is the output directory's results.json"),
        (["--workdir", "out"], "--output-dir 'out' is the working directory of the blocks"),
    ],
)
def test_reports_cannot_be_pointed_at_the_guide_or_each_other(
    tmp_path: Path, run_harness, flags: list[str], said: str
) -> None:
    guide = tmp_path / "guide.md"
    text = _test("a", "echo one > made-by-block.txt; echo one", "one")
    guide.write_text(text)
    (tmp_path / "link.xml").symlink_to(guide)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text('{"earlier": true}\n')
    done = run_harness("guide.md", "--output-dir", "out", *flags)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr
    assert guide.read_text() == text
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == {"earlier": True}
    assert not (tmp_path / "made-by-block.txt").exists() and not (tmp_path / "out" / "made-by-block.txt").exists()


def test_collect_does_not_follow_another_users_link(tmp_path: Path, guide_runner) -> None:
    """A link another user planted among the guide's logs could hand them a file only root may read."""
    _as_root()
    secret = _outside(tmp_path, "root only\n", 0o600)
    mine = _outside(tmp_path, "mine\n")
    mine = mine.rename(mine.with_name("mine.txt"))
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    (shared / "planted.log").symlink_to(secret)
    os.lchown(shared / "planted.log", NOBODY, NOBODY)
    (shared / "own.log").symlink_to(mine)  # a link of the harness's own user is followed
    guide = f'---\nci:\n  collect: ["{shared}/*.log"]\n---\n\n' + _test("a", "echo one", "one")
    run = guide_runner(guide)
    assert run.returncode == 0, run.stdout + run.stderr
    files = {Path(f["source"]).name: f for f in run.record["guides"][0]["collected"]["files"]}
    assert files["planted.log"]["copied_to"] is None
    assert f"{shared}/planted.log is a symbolic link of another user (uid {NOBODY})" in files["planted.log"]["note"]
    assert (run.output_dir / files["own.log"]["copied_to"]).read_text() == "mine\n"
    copies = [p for p in (run.output_dir / "collected").rglob("*") if p.is_file()]
    assert all(p.read_text() != "root only\n" for p in copies)


def test_a_local_guide_larger_than_the_limit_is_refused_unread(tmp_path: Path, run_harness) -> None:
    """A path to a huge file (or /dev/zero) is said at once, as a URL guide is, not read until memory runs out."""
    huge = tmp_path / "huge.md"
    with huge.open("wb") as handle:
        handle.truncate(17 * 1024 * 1024)  # sparse: no disk used
    for extra in ([], ["--update"]):
        done = run_harness("huge.md", "--output-dir", "out", *extra)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "huge.md: cannot read the guide: it is larger than 16.0 MiB, the limit for a guide" in done.stderr
