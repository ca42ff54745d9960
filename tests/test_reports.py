"""Reporters: the job log, GitHub Actions output, the step summary and JUnit, against golden files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import junitparser
import pytest

from ci.report.github import escape_data, escape_property
from ci.report.summary import SUMMARY_LIMIT_BYTES, fit_summary, table_cell

GOLDEN = Path(__file__).parent / "golden"
FENCE = "```"


def _normalise(text: str, tmp_path: Path) -> str:
    """Remove what changes from run to run: paths, durations, sizes of timing-dependent things, tokens."""
    text = text.replace(str(tmp_path), "TMP")
    text = re.sub(r"\d+\.\d+s", "N.NNs", text)
    text = re.sub(r'time="[\d.]+"', 'time="N"', text)
    text = re.sub(r'timestamp="[^"]+"', 'timestamp="T"', text)
    text = re.sub(r"[0-9a-f]{32}", "TOKEN", text)
    text = re.sub(r"\d+\.\d (KiB|MiB|GiB)", r"N \1", text)
    text = re.sub(r"2000-01-01 \d\d:\d\d:\d\d\.\d{3}", "2000-01-01 HH:MM:SS.mmm", text)  # the timeline's times
    return text


def _check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path} differs (rerun with UPDATE_GOLDEN=1 and review the diff)"


def _run_fixture(
    run_harness: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    guide = tmp_path / "report-guide.md"
    shutil.copy(GOLDEN / "report-guide.md", guide)
    return run_harness(
        *("report-guide.md", "--output-dir", "out", "--junit", "junit.xml", "--keep-going", *extra),
        env=env,
        timeout_s=120,
    )


def test_console_log_matches_golden(tmp_path: Path, run_harness) -> None:
    done = _run_fixture(run_harness, tmp_path)
    assert done.returncode == 1
    _check_golden("console.txt", _normalise(done.stdout, tmp_path))


def test_verbose_console_log_matches_golden(tmp_path: Path, run_harness) -> None:
    done = _run_fixture(run_harness, tmp_path, "--verbose")
    assert done.returncode == 1
    _check_golden("console-verbose.txt", _normalise(done.stdout, tmp_path))


def test_github_actions_console_log_matches_golden_in_colour(tmp_path: Path, run_harness) -> None:
    done = _run_fixture(run_harness, tmp_path, GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(tmp_path))
    assert done.returncode == 1
    # the escape character written as \e, so that the golden file reads as text
    _check_golden("console-github.txt", _normalise(done.stdout, tmp_path).replace("\x1b", "\\e"))


def test_junit_matches_golden_and_reads_back(tmp_path: Path, run_harness) -> None:
    _run_fixture(run_harness, tmp_path)
    xml_text = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    _check_golden("junit.xml", _normalise(xml_text, tmp_path))
    suites = list(junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    assert len(suites) == 1
    cases = {case.name: case for case in suites[0]}
    assert set(cases) == {
        "#test-setup store=name",
        "hello",
        "drifted",
        "crashes",
        "#test-setup sha256:a3506795fabf",
    }
    assert cases["hello"].is_passed
    drifted = cases["drifted"].result[0]
    assert isinstance(drifted, junitparser.Failure) and drifted.type == "mismatch"
    assert isinstance(cases["crashes"].result[0], junitparser.Failure)
    assert isinstance(cases["#test-setup sha256:a3506795fabf"].result[0], junitparser.Skipped)


def _junit_names(tmp_path: Path, env: dict[str, str], guide_text: str) -> list[str]:
    guide = tmp_path / "names.md"
    guide.write_text(guide_text, encoding="utf-8")
    junit = tmp_path / "names.xml"
    subprocess.run(
        [sys.executable, "-m", "ci.run", str(guide), "--junit", str(junit), "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
        check=True,
    )
    return [case.name for suite in junitparser.JUnitXml.fromfile(str(junit)) for case in suite]


def test_junit_names_survive_a_block_inserted_above_them(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """Report tools follow a test by its name: inserting a block must not rename the blocks after it."""
    setup = f"{FENCE}shell #test-setup\ntrue\n{FENCE}\n\n"
    blocks = (
        f'{FENCE}shell #test-setup id="prepare"\ntrue\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup store="greeting"\necho hi\n{FENCE}\n\n'
        f'{FENCE}shell #test id="check"\necho ok\n{FENCE}\n\n'
        f'{FENCE}shell #test-result id="check"\nok\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup store="greeting"\necho again\n{FENCE}\n'
    )
    before = _junit_names(tmp_path, harness_env, "# Names\n\n" + setup + blocks)
    inserted = f'{FENCE}shell #test id="new"\necho new\n{FENCE}\n\n{FENCE}shell #test-result id="new"\nnew\n{FENCE}\n\n'
    after = _junit_names(tmp_path, harness_env, "# Names\n\n" + inserted + setup + blocks)
    assert before == [
        "#test-setup sha256:" + hashlib.sha256(b"true").hexdigest()[:12],
        "#test-setup prepare",
        "#test-setup store=greeting",
        "check",
        "#test-setup store=greeting (2)",
    ]
    assert after == ["new", *before]


def test_github_actions_groups_annotations_and_summary(tmp_path: Path, run_harness) -> None:
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}
    done = _run_fixture(run_harness, tmp_path, **env)
    log = done.stdout
    assert log.count("::group::") == log.count("::endgroup::") == 4
    annotations = [line for line in log.splitlines() if line.startswith("::error ")]
    # the first failure comes first; a mismatch points at the first expected line that failed
    assert annotations[0].startswith("::error file=report-guide.md,line=27,title=#test drifted%3A mismatch::")
    # a failure's annotation says why: the exception line that ends the block's traceback
    assert annotations[1] == (
        "::error file=report-guide.md,line=30,title=#test crashes%3A failed::exit 4: RuntimeError: the model is missing"
    )
    text = summary.read_text(encoding="utf-8")
    assert "report-guide.md: failed" in text
    assert "| 3 | `#test drifted` | mismatch |" in text
    assert "| 5 | `#test-setup #5` | skipped |" in text
    _check_golden("summary.md", _normalise(text, tmp_path))


def test_block_output_cannot_issue_workflow_commands(guide_runner, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    run = guide_runner(
        f"""
        {FENCE}shell #test id="evil"
        echo "::error file=x::pwned"
        echo "::add-mask::leak" >&2
        echo "why: ##[add-mask]leak" >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-result id="evil"
        nothing
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    stopped_by: str | None = None
    for line in run.stdout.splitlines():
        if line.startswith("::stop-commands::"):
            stopped_by = line.removeprefix("::stop-commands::")
        elif stopped_by is not None and line == f"::{stopped_by}::":
            stopped_by = None
        elif stopped_by is None and line.startswith("::error "):
            # its annotation quotes its last line as its message: data, for the runner reads a line that starts
            # with a workflow command as that command alone (the older `##[` form is looked for only after);
            # the recap, which quotes it too, is wrapped
            assert line.endswith("::exit 1: why: ##[add-mask]leak"), line
        elif "pwned" in line or "add-mask" in line:
            assert stopped_by is not None, f"block output outside stop-commands: {line!r}"
            assert len(stopped_by) >= 32
    assert "pwned" in run.stdout


def test_at_most_ten_annotations_first_failure_first(guide_runner) -> None:
    blocks = "\n".join(f'{FENCE}shell #test-setup id="b{i}"\nexit {i}\n{FENCE}\n' for i in range(1, 13))
    run = guide_runner(blocks, "--keep-going", env={"GITHUB_ACTIONS": "true"})
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 10
    assert "title=#test-setup b1%3A failed" in annotations[0]


def test_document_errors_become_annotations(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="lonely"
        echo hi
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true"},
    )
    assert run.returncode == 2
    assert "::error file=" in run.stderr and ",line=1,title=guide document error::" in run.stderr


def test_under_actions_the_list_is_the_plan_alone(guide_runner, tmp_path: Path) -> None:
    """`--list` and `--list --format json` print the plan on stdout, warnings and document errors on stderr,
    their annotations too: under GitHub Actions stdout is still a plan a workflow step can read."""
    warned = f"""
        {FENCE}shell #test-setup store="name"
        echo hi
        {FENCE}

        {FENCE}shell #test-result id="nowhere"
        hi
        {FENCE}
        """
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    run = guide_runner(warned, "--list", "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    assert [entry["store"] for entry in json.loads(run.stdout)] == ["name"]
    assert "::warning file=guide.md,line=5,title=guide warning::" in run.stderr
    run = guide_runner(warned, "--list", env=env)
    assert run.returncode == 0, run.stderr
    assert "::" not in run.stdout and "::warning file=" in run.stderr
    broken = f"""
        {FENCE}shell #test id="lonely"
        echo hi
        {FENCE}
        """
    for args in (("--list",), ("--list", "--format", "json")):
        run = guide_runner(broken, *args, env=env)
        assert run.returncode == 2
        assert run.stdout == "", "nothing is listed when the guide has document errors"
        assert "::error file=guide.md,line=1,title=guide document error::" in run.stderr


@pytest.mark.parametrize(
    ("raw", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("50% done", "50%25 done", "50%25 done"),
        ("a\nb\r", "a%0Ab%0D", "a%0Ab%0D"),
        ("docs/a,b.md:3", "docs/a,b.md:3", "docs/a%2Cb.md%3A3"),
    ],
)
def test_workflow_command_escaping(raw: str, data: str, prop: str) -> None:
    assert escape_data(raw) == data
    assert escape_property(raw) == prop


def test_a_step_summary_over_the_limit_is_cut_and_says_where_the_rest_is() -> None:
    small = "## Run\n\n| a | b |\n"
    assert fit_summary(small, "results.json") == small
    # 3-byte characters, so that the cut falls inside one and must not leave half of it
    large = "| `#test big` | " + "運" * (SUMMARY_LIMIT_BYTES // 3) + " |\n"
    cut = fit_summary(large, "the job log")
    assert len(cut.encode()) < SUMMARY_LIMIT_BYTES
    assert cut.startswith("| `#test big` | 運運")
    assert cut.endswith("\n\n(summary cut to stay under the 1 MiB limit; see the job log)\n")
    assert "\ufffd" not in cut


def test_a_table_cell_stays_one_cell_on_one_line() -> None:
    assert table_cell("a | b\nc\x1b[31m") == "a \\| b c"


# The process the block leaves running. It opens the FIFO `started` for writing, which returns only once the
# block's `cat started` has opened it for reading, so the block ends only after the python has started: the
# run's end finds it as python, never as the shell forked to start it (`bash -c` and the whole block, which
# the summary's 200-character cut would shorten before the pixel) nor in the middle of its exec() (no command
# line yet). `exec -a python` keeps its command line the same length wherever the checkout is.
LEFT_RUNNING = 'import time; open("started", "w").close(); time.sleep(300)'


def test_guide_and_output_text_cannot_disguise_the_log(guide_runner, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    run = guide_runner(
        f"""
        Two lines of heading
        ::error::injected by a heading
        ==============================

        {FENCE}shell #test-setup
        printf 'red \\xc2\\x9b31mtext\\xc2\\x9b0m and \\xe2\\x80\\xaereversed\\xe2\\x80\\xac\\n'
        mkfifo started
        exec -a python {sys.executable} -c '{LEFT_RUNNING}' '`![pixel](http://example.invalid/p.png)`' &
        cat started
        exit 1
        {FENCE}
        """,
        "--grace",
        "5",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert run.returncode == 1, run.stdout
    lines = run.stdout.splitlines()
    assert not [line for line in lines if line.startswith("::error::injected")]
    group = next(line for line in lines if line.startswith("::group::"))
    assert "Two lines of heading ::error::injected by a heading" in group
    record = (run.output_dir / "results.json").read_text(encoding="utf-8")
    for text in (run.stdout, record, summary.read_text(encoding="utf-8")):
        assert not any(
            "\x80" <= c <= "\x9f" or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069" for c in text
        )
    assert "red text and <U+202E>reversed<U+202C>" in run.stdout
    [leftover] = [line for line in summary.read_text(encoding="utf-8").splitlines() if "time.sleep(300)" in line]
    # the command line's backticks stay inside the code span: its fence is longer than any run in it, and
    # the span is padded with a space, as its text ends with a backtick
    command = f"python -c {LEFT_RUNNING} `![pixel](http://example.invalid/p.png)`"
    assert re.fullmatch(rf"- pid \d+ `` {re.escape(command)} `` \(from #1\): SIGTERM", leftover), leftover
