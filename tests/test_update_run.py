"""`python -m ci.run GUIDE --update`: the run as a plain run makes it, then the guide updated from it, in one command."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from immutable import immutable

FENCE = "```"


def _test(ident: str, command: str, expected: str) -> str:
    return f'{FENCE}shell #test id="{ident}"\n{command}\n{FENCE}\n\n{FENCE}shell #test-result id="{ident}"\n{expected}\n{FENCE}\n'


def _setup(ident: str, *body: str) -> str:
    return f'{FENCE}shell #test-setup id="{ident}"\n' + "\n".join(body) + f"\n{FENCE}\n"


def _statuses(output_dir: Path) -> dict[str, str]:
    record = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    return {b["id"]: b["status"] for b in record["blocks"]}


PROSE = "# A guide\r\n\r\nProse that stays byte for byte, trailing blanks too:   \r\n\r\n"


def test_update_runs_the_guide_then_rewrites_only_the_mismatched_bodies(tmp_path: Path, run_harness) -> None:
    body = _test("changed", "echo pid $$; echo version 1.3", "pid ...\nversion 1.2") + "\n"
    body += _test("same", "echo same", "same") + "\n" + _test("also", "echo 2", "1")
    original = "\ufeff" + PROSE + body.replace("\n", "\r\n")
    guide = tmp_path / "guide.md"
    guide.write_bytes(original.encode("utf-8"))

    done = run_harness("guide.md", "--update", "--keep-going", "--output-dir", "out", "--junit", "j.xml")

    assert done.returncode == 0, done.stdout + done.stderr
    # the run, as a plain run reports it: its log, its verdict, every report on disk
    assert _statuses(tmp_path / "out") == {"changed": "mismatch", "same": "passed", "also": "mismatch"}
    assert "<testsuite" in (tmp_path / "j.xml").read_text(encoding="utf-8")
    verdict = re.search(r"\[ERROR\] === guide\.md: FAILED \(3 blocks: 1 passed, 2 mismatch\) in .*\n", done.stdout)
    assert verdict is not None, done.stdout
    # then the update: its diff after the verdict, what it did on stderr
    assert done.stdout[verdict.end() :].startswith("--- a/guide.md\n+++ b/guide.md\n"), done.stdout
    assert "-version 1.2\n" in done.stdout and "+version 1.3\n" in done.stdout
    assert "guide.md: updated 2 #test-result blocks" in done.stderr
    # the last line tells the command's story, as its exit status does: the run's FAILED above was its mismatches
    assert done.stdout.splitlines()[-1] == (
        "=== update: UPDATED: the run had 2 mismatches; every mismatch was updated: the guide now matches this run"
        " (review the diff before committing)"
    ), done.stdout
    # only the two bodies changed, every other byte (BOM, CRLF, the wildcard, trailing blanks) kept
    expected = original.replace("version 1.2", "version 1.3").replace('"also"\r\n1\r\n', '"also"\r\n2\r\n')
    assert guide.read_bytes() == expected.encode("utf-8")
    again = run_harness("guide.md", "--update", "--output-dir", "out2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "guide.md: nothing to update" in again.stderr
    assert again.stdout.splitlines()[-1] == "=== update: PASSED: nothing to update, every block that ran passed"
    assert guide.read_bytes() == expected.encode("utf-8")


def test_update_honours_the_selection_and_the_default_output_dir(tmp_path: Path, run_harness) -> None:
    guide = tmp_path / "guide.md"
    text = _test("picked", "echo new", "old") + "\n" + _test("left", "echo 2", "1")
    guide.write_text(text, encoding="utf-8")

    done = run_harness("guide.md", "--update", "--only", "picked")

    assert done.returncode == 0, done.stdout + done.stderr  # a block the selection left out is no failure
    kept = re.search(r"^full block outputs: (.+)$", done.stdout, re.MULTILINE)
    assert kept is not None, done.stdout
    statuses = _statuses(Path(kept.group(1)))
    shutil.rmtree(kept.group(1))
    assert statuses == {"picked": "mismatch", "left": "not_run"}
    assert guide.read_text(encoding="utf-8") == text.replace("\nold\n", "\nnew\n")  # "left" is not touched


def test_an_update_run_goes_on_past_its_mismatches_and_stops_at_a_failure(guide_runner) -> None:
    guide = "\n".join(
        [
            _test("first", "echo new", "old"),
            _test("second", "echo 2", "1"),
            _setup("broken", "exit 3"),
            _test("third", "echo 4", "3"),
        ]
    )
    run = guide_runner(guide, "--update")
    assert run.returncode == 1, run.stdout + run.stderr
    # the mismatches are what it rewrites, so they do not stop the run; a failure does, as in any run
    assert run.statuses() == {"first": "mismatch", "second": "mismatch", "broken": "failed", "third": "not_run"}
    assert "1 block did not run (the run stopped at a failure or its deadline)" in run.stderr
    assert "with --keep-going to check and update every block in one run" in run.stderr
    text = run.guide.read_text(encoding="utf-8")
    assert '"first"\nnew\n' in text and '"second"\n2\n' in text and '"third"\n3\n' in text


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        pytest.param(_setup("broken", "echo oops; exit 3"), "failed", id="failed"),
        pytest.param(
            _setup("broken", "sleep 30").replace('id="broken"', 'id="broken" timeout="1"'), "timed_out", id="timed-out"
        ),
    ],
)
def test_a_failed_block_is_said_and_exits_1_though_the_mismatches_are_updated(
    guide_runner, setup: str, status: str
) -> None:
    guide = setup + "\n" + _test("drifted", "echo 2", "1")
    run = guide_runner(guide, "--update", "--keep-going")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.statuses() == {"broken": status, "drifted": "mismatch"}
    assert "1 block did not pass for a reason other than its output" in run.stderr
    assert "an update cannot fix that" in run.stderr
    assert run.stdout.splitlines()[-1] == (
        "[ERROR] === update: FAILED: the run had 1 mismatch, 1 of them rewritten;"
        " 1 block failed, timed out or could not run (said above)"
    ), run.stdout
    assert '"drifted"\n2\n' in run.guide.read_text(encoding="utf-8")


def test_a_mismatch_left_alone_exits_1_and_says_why(guide_runner) -> None:
    guide = _test("fence", f"printf 'ok\\n{FENCE}\\n'", "ok") + "\n" + _test("plain", "echo 2", "1")
    run = guide_runner(guide, "--update", "--keep-going")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "id='fence': the new output holds a line that would close the fence" in run.stderr
    assert run.stdout.splitlines()[-1] == (
        f"[ERROR] === update: FAILED: the run had 2 mismatches, 1 of them rewritten; {run.guide} not (wholly) updated"
        " (said above)"
    ), run.stdout
    assert run.guide.read_text(encoding="utf-8") == guide.replace('"plain"\n1\n', '"plain"\n2\n')


def test_an_interrupted_run_updates_nothing(guide_runner) -> None:
    guide = (
        _test("drifted", "echo new", "old") + "\n" + _setup("stop", 'kill -TERM "$(cat out/harness.pid)"', "sleep 30")
    )
    run = guide_runner(guide, "--update", "--keep-going")
    assert run.returncode == 143, run.stdout + run.stderr
    assert run.record["exit_status"] == 143  # the run's reports are written as ever
    assert run.statuses()["drifted"] == "mismatch"  # it finished before the signal, and still is not written
    assert "the run was interrupted (SIGTERM): no guide was updated" in run.stderr
    assert run.guide.read_text(encoding="utf-8") == guide
    assert "--- a/" not in run.stdout


def test_a_guide_edited_during_the_run_is_not_overwritten(guide_runner) -> None:
    edit = "\nA line someone added while the run went on.\n"
    guide = _test("drifted", "echo new", "old") + "\n" + _setup("edits", f"printf '{edit}' >> guide.md")
    run = guide_runner(guide, "--update", "--keep-going")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.statuses() == {"drifted": "mismatch", "edits": "passed"}
    assert (
        f"[ERROR] {run.guide}: the guide changed on disk during the run (edited, or written by a block),"
        " so it was not updated: that change is kept. Check it, then run the update again" in run.stderr
    )
    assert run.guide.read_text(encoding="utf-8") == guide + edit  # the edit, and no update over it


def test_several_guides_are_each_updated(tmp_path: Path, run_harness) -> None:
    (tmp_path / "docs").mkdir()
    one, two = tmp_path / "one.md", tmp_path / "docs" / "two.md"
    one.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    two.write_text(_test("b", "echo fine", "fine") + "\n" + _test("c", "echo 2", "1"), encoding="utf-8")
    done = run_harness("one.md", "docs/two.md", "--update", "--output-dir", "out", "--workdir", "docs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "one.md: updated 1 #test-result block\n" in done.stderr
    assert "docs/two.md: updated 1 #test-result block\n" in done.stderr
    assert '"a"\nnew\n' in one.read_text(encoding="utf-8")
    assert '"c"\n2\n' in two.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["https://user:s3cr3t-pass@example.invalid/guide.md", "--update"],
            "https://***@example.invalid/guide.md: only a local guide can be updated; name its file",
            id="url",
        ),
        pytest.param(
            ["guide.md", "./guide.md", "--update"],
            "./guide.md: the same guide as guide.md; name each guide to update once",
            id="twice",
        ),
        pytest.param(
            ["guide.md", "--update", "--list"],
            "--update runs the guides (or reads --from-run DIR) and --list runs nothing: give one of them",
            id="list",
        ),
        pytest.param(
            ["guide.md", "--from-run", "out"],
            "--from-run DIR goes with --update: add --update to update the guides from that run",
            id="from-run-alone",
        ),
    ],
)
def test_what_cannot_be_updated_is_a_usage_error_before_anything_runs(
    tmp_path: Path, run_harness, args: list[str], message: str
) -> None:
    text = _setup("marks", "touch ran") + "\n" + _test("a", "echo new", "old")
    (tmp_path / "guide.md").write_text(text, encoding="utf-8")
    done = run_harness(*args, "--output-dir", "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"[ERROR] {message}\n" in done.stderr
    assert "s3cr3t" not in done.stdout + done.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
    assert (tmp_path / "guide.md").read_text(encoding="utf-8") == text


def test_a_guide_named_through_a_symbolic_link_is_updated_where_it_is(tmp_path: Path, run_harness) -> None:
    (tmp_path / "docs").mkdir()
    real = tmp_path / "docs" / "guide.md"
    real.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    link = tmp_path / "link.md"
    link.symlink_to("docs/guide.md")
    done = run_harness("link.md", "--update", "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert link.is_symlink() and os.readlink(link) == "docs/guide.md"  # still the link it was
    assert '"a"\nnew\n' in real.read_text(encoding="utf-8")
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["guide.md"]  # no temporary file left


def test_a_guide_that_cannot_be_written_is_said_and_the_others_are_still_updated(tmp_path: Path, run_harness) -> None:
    (tmp_path / "locked").mkdir()
    stuck, other = tmp_path / "locked" / "stuck.md", tmp_path / "other.md"
    stuck.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    other.write_text(_test("b", "echo 2", "1"), encoding="utf-8")
    with immutable(tmp_path / "locked"):
        done = run_harness("locked/stuck.md", "other.md", "--update", "--output-dir", "out")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert (
        "[ERROR] locked/stuck.md: the rewritten guide was not written because it could not be written"
        f" (Operation not permitted; the new content goes to a file in {tmp_path / 'locked'} first)" in done.stderr
    )
    assert stuck.read_text(encoding="utf-8") == _test("a", "echo new", "old")
    assert "other.md: updated 1 #test-result block" in done.stderr
    assert '"b"\n2\n' in other.read_text(encoding="utf-8")


@pytest.mark.parametrize("printed", [r"a\r\nb\r\n", r"a\0b\n"], ids=["crlf", "nul"])
def test_output_a_markdown_body_cannot_hold_is_left_alone_and_the_rest_updated(guide_runner, printed: str) -> None:
    guide = _test("odd", f"printf '{printed}'", "old") + "\n" + _test("plain", "echo 2", "1")
    run = guide_runner(guide, "--update", "--keep-going")
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "warning: " + str(run.guide) + ": #test id='odd': the output holds a carriage return (CR) or a NUL byte,"
        " which a Markdown code block cannot hold; left alone (match that part with a wildcard)\n" in run.stderr
    )
    assert run.guide.read_text(encoding="utf-8") == guide.replace('"plain"\n1\n', '"plain"\n2\n')


def test_a_read_only_guide_is_not_replaced(tmp_path: Path, run_harness) -> None:
    """A rename would replace it all the same (and root may write anything): its mode says it is not to change."""
    guide = tmp_path / "guide.md"
    guide.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    guide.chmod(0o444)
    done = run_harness("guide.md", "--update", "--output-dir", "out")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "[ERROR] guide.md: the rewritten guide was not written because the file is read-only (mode 444):"
        " make it writable (chmod u+w) to update it\n" in done.stderr
    )
    assert guide.read_text(encoding="utf-8") == _test("a", "echo new", "old")
    assert stat.S_IMODE(guide.stat().st_mode) == 0o444


def test_a_guide_root_updates_keeps_its_owner(tmp_path: Path, run_harness) -> None:
    """An update run as root (a container over a checkout) leaves the guide its user's, not root's."""
    if os.geteuid() != 0:
        pytest.skip("only root may give a file to another user")
    guide = tmp_path / "guide.md"
    guide.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    os.chown(guide, 65534, 65534)
    done = run_harness("guide.md", "--update", "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"a"\nnew\n' in guide.read_text(encoding="utf-8")
    assert (guide.stat().st_uid, guide.stat().st_gid) == (65534, 65534)


def test_a_guide_with_the_longest_file_name_is_updated(tmp_path: Path, run_harness) -> None:
    """Its temporary file beside it is named within the file system's 255 bytes too."""
    name = "é" * 126 + ".md"  # 255 bytes in UTF-8
    guide = tmp_path / name
    guide.write_text(_test("a", "echo new", "old"), encoding="utf-8")
    done = run_harness(name, "--update", "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"a"\nnew\n' in guide.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "out"])
