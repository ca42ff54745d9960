"""The plain-fence and Python-console dialects: their plans (--list --format json) and tiny real runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from outside import fence_guides_dir

from ci.expect.match import matches
from ci.guide.dialects import plan_guide
from ci.guide.model import DocumentError

REPO = Path(__file__).resolve().parent.parent
Harness = Callable[..., subprocess.CompletedProcess[str]]


def _listed(run_harness: Harness, guide: Path | str, *args: str) -> list[dict[str, Any]]:
    done = run_harness(str(guide), "--list", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    entries: list[dict[str, Any]] = json.loads(done.stdout)
    return entries


def test_the_compat_llama_cpp_guide_lists_the_steps_the_reference_parses(run_harness: Harness) -> None:
    # what the reference's own parse test states for this guide: 8 steps, 6 run then 2 skipped, the model
    # download and the inference with expected output, the inference's naming CANN0
    guide = next(fence_guides_dir().glob("llama.cpp-*.md"))
    steps = _listed(run_harness, guide, "--commands", "--dialect", "fences", "--set", "UPSTREAM_REF=master")
    assert len(steps) == 8
    assert ["skip" in step for step in steps] == [False] * 6 + [True] * 2
    keys = ["set_env.sh", "npu-smi info", "ASCEND_HOME_PATH", "cmake --build", "curl", "llama-completion"]
    keys += ["-sm layer", "llama-cli"]
    for step, key in zip(steps, keys, strict=True):
        assert key in step["command"]
    plan = plan_guide(guide.read_text(encoding="utf-8"), str(guide), dialect="fences", upstream_ref="master")
    for planned, key in zip(plan.steps, keys, strict=True):
        assert key in planned.body
    assert "export PATH=/usr/local/sbin:$PATH" in plan.steps[0].body
    assert plan.steps[1].body.strip() == "npu-smi info"
    assert " -v" in plan.steps[5].body
    assert ["expected" in step for step in steps] == [False] * 4 + [True] * 2 + [False] * 2
    assert "CANN0" in steps[5]["expected"]
    assert all(step["merge_streams"] for step in steps) and steps[5]["expected_search"]
    assert all(step["language"].startswith("shell") for step in steps)


def test_time_limits_by_command_kind_come_from_the_command_line_first_match_wins(run_harness: Harness) -> None:
    guide = next(fence_guides_dir().glob("llama.cpp-*.md"))
    rules = ["--timeout-rule", "cmake --build=2h", "--timeout-rule", "llama-completion=15m"]
    rules += ["--timeout-rule", "curl=15m", "--timeout", "5m", "--dialect", "fences", "--set", "UPSTREAM_REF=master"]
    steps = _listed(run_harness, guide, *rules)
    assert [step["timeout_s"] for step in steps[:6]] == [300, 300, 300, 7200, 900, 900]


def test_a_shell_fence_with_doctest_prompts_is_a_document_error_at_its_line(guide_runner: Any) -> None:
    run = guide_runner("# T\n\n```shell\necho hi\n>>> echo hi\n```\n", "--dialect", "fences")
    assert run.returncode == 2
    assert "guide.md:5:" in run.stderr and "```pycon" in run.stderr


def test_prose_between_a_run_fence_and_a_text_fence_leaves_it_unchecked() -> None:
    text = "```shell\necho only-exit-code\n```\n\nSome prose.\n\n```text\nmust_not_attach\n```\n"
    (step,) = plan_guide(text, "g.md", dialect="auto").steps
    assert step.expected is None and step.body == "echo only-exit-code"


def test_auto_takes_the_labels_when_any_is_there() -> None:
    text = "```shell #test-setup\necho a\n```\n\n```shell\necho b\n```\n"
    (step,) = plan_guide(text, "g.md", dialect="auto").steps
    assert step.body == "echo a"
    assert len(plan_guide(text, "g.md", dialect="fences").steps) == 2


def test_front_matter_names_the_dialect_and_its_rules() -> None:
    text = '---\nci:\n  dialect: fences\n  timeout_rules: [{contains: "make", timeout: 2m}]\n---\n```shell\nmake\n```\n'
    (step,) = plan_guide(text, "g.md", dialect="labels").steps
    assert step.timeout_s == 120 and step.merge_streams


def test_both_dialects_and_no_label_is_a_document_error_naming_the_fix() -> None:
    text = "# g\n\n```pycon\n>>> 1\n```\n\n```shell\necho\n```\n\n```pycon\n>>> 2\n```\n"
    with pytest.raises(DocumentError) as raised:
        plan_guide(text, "g.md", dialect="auto")
    (problem,) = raised.value.problems
    assert str(problem).startswith(
        "g.md:3: both ```shell fences (the first at line 7) and ```pycon fences (the first at line 3)"
    )
    assert "--dialect fences" in problem.message and "--dialect pycon" in problem.message
    assert "ci.dialect" in problem.message


@pytest.mark.parametrize(
    ("dialect", "text", "said", "fix"),
    [
        # no fence of its kind: no line to blame, and the message says so
        ("fences", "# g\n\n```text\nhi\n```\n", "g.md: no ```shell fence at any line", "--dialect pycon for a"),
        ("pycon", "# g\n\n```shell\necho\n```\n", "g.md: no ```pycon fence at any line", "--dialect fences for"),
        ("pycon", "# g\n\n```pycon\n\n```\n", "g.md:3: the ```pycon fence holds no '>>> '", "start each statement"),
    ],
)
def test_a_dialect_given_a_guide_it_cannot_read_says_where_or_that_no_line_is_to_blame(
    dialect: str, text: str, said: str, fix: str
) -> None:
    with pytest.raises(DocumentError) as raised:
        plan_guide(text, "g.md", dialect=dialect)
    (problem,) = raised.value.problems
    assert str(problem).startswith(said) and fix in problem.message


def test_pycon_reads_statements_outputs_and_rejects_stray_lines() -> None:
    text = "```pycon\n>>>\n>>> x = 1\n>>> if x:\n...     print(x)\n1\n>>> print(2)\n...\n```\n"
    (step,) = plan_guide(text, "g.md", dialect="auto").steps
    # x = 1 may print anything: a wildcard opens the next output's line; print(2)'s bare `...` ends the body
    assert step.expected is not None and step.expected.body == "...1\n..."
    # a statement that may print anything sits between two outputs: printing nothing there passes too
    quiet = "```pycon\n>>> print(1)\n1\n>>> import os\n>>> print(2)\n2\n```\n"
    expected = plan_guide(quiet, "g.md", dialect="auto").steps[0].expected
    assert expected is not None and expected.guide_lines == (3, 6)
    assert matches("1\n2\n", expected.body) and matches("1\nnoise\n2\n", expected.body)
    assert not matches("1\n3\n", expected.body)
    only_any = "```pycon\n>>> print(1)\n...\n>>> print(2)\n```\n"
    assert (
        plan_guide(only_any, "g.md", dialect="auto").steps[0].expected is None
    )  # as the reference: the exit status alone
    with pytest.raises(DocumentError, match=r"g\.md:2: unexpected line 'stray'"):
        plan_guide("```pycon\nstray\n>>> 1\n```\n", "g.md", dialect="auto")


def test_merged_streams_interleave_in_one_file_that_every_report_calls_the_output(guide_runner: Any) -> None:
    # a real process: its stderr written between two stdout lines is found between them
    guide = (
        "```shell\necho one; echo BOOM two >&2; echo three\n```\n\n```text\none\nBOOM two\nthree\n```\n\n"
        "```shell\necho 'error: could not frobnicate' >&2; echo cleaning up; exit 1\n```\n"
    )
    junit = "junit.xml"
    run = guide_runner(guide, "--dialect", "fences", "--error-marker", "BOOM", "--junit", junit)
    assert run.returncode == 1, run.stdout + run.stderr
    blocks = run.output_dir / "blocks"
    assert sorted(path.name for path in blocks.iterdir()) == ["001-1.output.txt", "002-2.output.txt"]
    assert (blocks / "001-1.output.txt").read_text() == "one\nBOOM two\nthree\n"
    # no stream is said to be empty that was not: the sizes are the one output's
    assert "stderr 0 B" not in run.stdout and "--- stderr" not in run.stdout and "PASSED in" in run.stdout
    assert "output 19 B, stdout and stderr merged)" in run.stdout
    assert (
        "--- output (40 B, stdout and stderr merged)\nerror: could not frobnicate\ncleaning up\n[ERROR]" in run.stdout
    )
    # the failure's reason is the complaint a label block's stderr would end with, not the line after it
    assert "FAILED #2 at guide.md:11: exit 1: error: could not frobnicate" in run.stdout.replace(
        str(run.guide), "guide.md"
    )
    record = json.loads((run.output_dir / "results.json").read_text())
    first, second = record["blocks"]
    assert (first["streams_merged"], first["stderr_path"], first["stderr_bytes"]) == (True, None, 0)
    assert first["stdout_path"] == "blocks/001-1.output.txt" and first["error_marker"] == "BOOM"
    assert second["reason"] == "error: could not frobnicate"
    xml = (run.guide.parent / junit).read_text()
    assert "system-err" not in xml and "stdout and stderr merged" in xml


@pytest.mark.parametrize("example", ["fences.md", "pycon.md"])
def test_the_example_guides_pass(example: str, tmp_path: Path, harness_env: dict[str, str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.run",
            str(REPO / "docs" / "examples" / example),
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=harness_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_pycon_output_that_differs_is_a_mismatch_at_its_guide_line_and_a_search_not_found_too(
    guide_runner: Any, tmp_path: Path
) -> None:
    # line 8 is the first expected line that differs: every report points at it, not at the fence (line 1)
    session = "```pycon\n>>> 6 * 7\n42\n>>> import os\n>>> print(2); print(3)\n2\n\n4\n>>> print(5)\n```\n"
    summary = tmp_path / "summary.md"
    github = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    run = guide_runner(session, "--dialect", "auto", "--junit", str(tmp_path / "j.xml"), env=github)
    assert run.returncode == 1 and f"#1 at {run.guide}:8: stdout does not match" in run.stdout, run.stdout
    assert f"first failing expected line, {run.guide}:8 " in run.stdout and f"file={run.guide},line=8," in run.stdout
    (block,) = json.loads((run.output_dir / "results.json").read_text(encoding="utf-8"))["blocks"]
    assert block["failure_line"] == 8 and 'line="8"' in (tmp_path / "j.xml").read_text(encoding="utf-8")
    run = guide_runner(
        "```shell\necho version 1.2.3\n```\n```text\nversion 1.x.x\n```\n", "--dialect", "auto", name="other.md"
    )
    assert run.returncode == 1 and "the expected output is nowhere in the output" in run.stdout, run.stdout


def test_a_registry_entry_names_its_dialect_and_rules_checked_and_passed_to_the_matrix(
    tmp_path: Path, run_harness: Harness
) -> None:
    registry = tmp_path / "guides.yaml"
    guide = REPO / "docs" / "examples" / "fences.md"
    entry = f"  - name: plain\n    guide: {guide}\n    dialect: fences\n    timeout_rules: [{{contains: echo, timeout: 2m}}]\n"
    registry.write_text(f"defaults:\n  runner: [ubuntu-latest]\nguides:\n{entry}", encoding="utf-8")
    assert run_harness(str(registry), "--check", module="ci.registry").returncode == 0
    (row,) = json.loads(run_harness(str(registry), "--matrix", module="ci.registry").stdout)["include"]
    assert (row["dialect"], row["timeout-rules"]) == ("fences", "echo=120")
    registry.write_text(registry.read_text().replace("dialect: fences", "dialect: fence"), encoding="utf-8")
    done = run_harness(str(registry), "--check", module="ci.registry")
    assert done.returncode == 2 and "guides.yaml:6: entry 'plain': dialect: unknown dialect 'fence'" in done.stderr


def test_timeout_rules_for_a_labels_guide_are_a_warning_of_the_run_and_an_error_of_the_registry_check(
    tmp_path: Path, run_harness: Harness
) -> None:
    (tmp_path / "guide.md").write_text("# T\n\n```shell #test-setup\necho hi\n```\n", encoding="utf-8")
    listed = run_harness("guide.md", "--list", "--timeout-rule", "echo=2m")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    warning = "warning: guide.md: --timeout-rule (a registry entry's timeout_rules) sets limits by command kind for"
    assert warning in listed.stderr and "so the rules are ignored: read it with --dialect fences" in listed.stderr
    strict = run_harness("guide.md", "--list", "--strict", "--timeout-rule", "echo=2m")
    assert strict.returncode == 2, strict.stdout + strict.stderr
    # read as plain fences, the rules are the guide's limits: no warning
    fences = run_harness("guide.md", "--list", "--dialect", "fences", "--timeout-rule", "echo=2m")
    assert fences.returncode == 0 and "warning" not in fences.stderr, fences.stderr
    registry = tmp_path / "guides.yaml"
    entry = "  - name: labelled\n    guide: guide.md\n    timeout_rules: [{contains: echo, timeout: 2m}]\n"
    registry.write_text(f"defaults:\n  runner: [ubuntu-latest]\nguides:\n{entry}", encoding="utf-8")
    done = run_harness(str(registry), "--check", module="ci.registry")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "guides.yaml:6: entry 'labelled': timeout_rules sets limits by command kind" in done.stderr, done.stderr
    assert "the guide is read as labelled blocks, so the rules would be ignored" in done.stderr
    registry.write_text(registry.read_text().replace("guide: guide.md", "guide: guide.md\n    dialect: fences"))
    assert run_harness(str(registry), "--check", module="ci.registry").returncode == 0
    # the front matter's ci.timeout_rules in a guide read as labelled blocks: a warning at its line too
    front = "---\nci:\n  timeout_rules:\n    - {contains: echo, timeout: 2m}\n---\n"
    (tmp_path / "front.md").write_text(front + "```shell #test-setup\necho hi\n```\n", encoding="utf-8")
    listed = run_harness("front.md", "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "warning: front.md:3: ci.timeout_rules sets limits by command kind for the plain dialects" in listed.stderr
    assert run_harness("front.md", "--list", "--strict").returncode == 2


def test_a_reference_shaped_console_session_runs_as_one_program_and_checks_only_its_exit(tmp_path: Path) -> None:
    # the reference's shape: imports, a bare >>>, a call continued over `... ` lines, a last print with no output
    session = (
        "```pycon\n>>> import os\n>>>\n>>> joined = os.path.join(\n...     'a',\n...     'b',\n... )\n"
        ">>> print(joined)\n```\n"
    )
    (step,) = plan_guide(session, "g.md", dialect="auto").steps
    assert step.expected is None and step.language.value == "python"
    done = subprocess.run([sys.executable, "-c", step.body], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "a/b\n"), done.stderr
    failing = plan_guide("```pycon\n>>> 1 / 0\n```\n", "g.md", dialect="auto").steps[0]
    done = subprocess.run(
        [sys.executable, "-c", failing.body], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and 'File "g.md", line 2' in done.stderr and "ZeroDivisionError" in done.stderr


def test_upstream_ref_comes_from_the_environment_as_ci_passes_it_unless_set_gives_it(guide_runner: Any) -> None:
    guide = "```shell\necho checking out <UPSTREAM_REF>\n```\n\n```text\nchecking out v1.2.3\n```\n"
    run = guide_runner(guide, "--dialect", "fences", env={"UPSTREAM_REF": "v1.2.3"})
    assert run.returncode == 0, run.stdout + run.stderr
    given = guide_runner(
        guide, "--dialect", "fences", "--set", "UPSTREAM_REF=v9", env={"UPSTREAM_REF": "v1.2.3"}, name="given.md"
    )
    # an unlabelled guide read as the label contract, the default: nothing runs, whatever its fences hold
    plain = guide_runner(guide, env={"UPSTREAM_REF": "v1.2.3"}, name="plain.md")
    assert plain.returncode == 2 and "no runnable block" in plain.stdout + plain.stderr, plain.stdout + plain.stderr
    assert given.returncode == 1 and "the expected output is nowhere in the output" in given.stdout, given.stdout


def test_upstream_commit_wins_over_upstream_ref_as_the_reference_s_tests_fill_it(guide_runner: Any) -> None:
    guide = "```shell\necho checking out <UPSTREAM_REF>\n```\n\n```text\nchecking out 0123abc\n```\n"
    run = guide_runner(guide, "--dialect", "fences", env={"UPSTREAM_COMMIT": "0123abc", "UPSTREAM_REF": "master"})
    assert run.returncode == 0, run.stdout + run.stderr
    fallback = guide_runner(guide, "--dialect", "fences", env={"UPSTREAM_COMMIT": "", "UPSTREAM_REF": "0123abc"})
    assert fallback.returncode == 0, fallback.stdout + fallback.stderr


def test_upstream_ref_without_a_value_is_a_document_error_at_its_line_not_a_redirection(
    tmp_path: Path, run_harness: Harness
) -> None:
    guide = "# T\n\n```shell\necho ready\ngit checkout <UPSTREAM_REF>\n```\n\n```text\nat <UPSTREAM_REF>\n```\n"
    (tmp_path / "guide.md").write_text(guide, encoding="utf-8")
    empty = {"UPSTREAM_COMMIT": "", "UPSTREAM_REF": ""}
    done = run_harness("guide.md", "--list", "--dialect", "fences", env=empty)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "guide.md:5: <UPSTREAM_REF> has no value" in done.stderr and "guide.md:9: <UPSTREAM_REF>" in done.stderr
    assert "--set UPSTREAM_REF=COMMIT" in done.stderr and "2 document errors; nothing was run" in done.stderr
    # a skipped fence never runs: its placeholder needs no value
    (tmp_path / "skipped.md").write_text("```shell skip\ngit checkout <UPSTREAM_REF>\n```\n", encoding="utf-8")
    assert run_harness("skipped.md", "--list", "--dialect", "fences", env=empty).returncode == 0


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"UPSTREAM_COMMIT": "0123abc\n", "UPSTREAM_REF": "master"}, "UPSTREAM_COMMIT"),
        ({"UPSTREAM_COMMIT": "", "UPSTREAM_REF": "v1.2.3\nv1.2.4"}, "UPSTREAM_REF"),
    ],
)
def test_upstream_ref_holding_a_newline_says_what_is_wrong_and_names_the_variable(
    environment: dict[str, str], named: str, tmp_path: Path, run_harness: Harness
) -> None:
    """A newline is in the value (a file's whole text, a command's output with its last line): it has a value,
    one that cannot be a git ref, and the message says so rather than that it has none."""
    guide = "# T\n\n```shell\necho ready\ngit checkout <UPSTREAM_REF>\n```\n"
    (tmp_path / "guide.md").write_text(guide, encoding="utf-8")
    done = run_harness("guide.md", "--list", "--dialect", "fences", env=environment)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "has no value" not in done.stderr
    said = next(line for line in done.stderr.splitlines() if "guide.md:5: " in line)
    assert f"the environment's {named}, {environment[named]!r}, holds a newline" in said
    assert "a git ref never does" in said
    assert f"set {named} to the one commit or tag under test" in said and "--set UPSTREAM_REF=COMMIT" in said


@pytest.mark.parametrize(
    ("last", "what"),
    [("```shell\nexit 1\n", "so its commands never run"), ("```text\nbye\n", "so the output it expects is never")],
)
def test_an_unclosed_last_fence_is_a_warning_at_its_line_and_an_error_under_strict(
    last: str, what: str, tmp_path: Path, run_harness: Harness
) -> None:
    (tmp_path / "guide.md").write_text(f"# T\n\n```shell\necho hi\n```\n\n{last}", encoding="utf-8")
    listed = run_harness("guide.md", "--list", "--dialect", "fences")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    language = last.split("\n")[0]
    assert f"warning: guide.md:7: this {language} fence is never closed, {what}" in listed.stderr, listed.stderr
    assert "close it with a line of three backticks" in listed.stderr
    strict = run_harness("guide.md", "--dialect", "fences", "--strict", "--output-dir", "out")
    assert strict.returncode == 2 and "[ERROR] guide.md:7: this" in strict.stderr, strict.stdout + strict.stderr
    assert not (tmp_path / "out").exists()  # nothing was run


def test_the_front_matters_retry_applies_to_a_plain_fence_block(guide_runner: Any) -> None:
    # the block fails on its first attempt (no mark yet) and passes on the second: ci.retry gives it one
    guide = (
        "---\nci:\n  dialect: fences\n  retry: 1\n  retry_delay: 0s\n---\n# T\n\n"
        "```shell\nif [ -e mark ]; then echo second; else touch mark; echo first; exit 3; fi\n```\n\n"
        "```text\nsecond\n```\n\n```shell skip\nexit 1\n```\n"
    )
    run = guide_runner(guide)
    assert run.returncode == 0, run.stdout + run.stderr
    (block, skipped) = json.loads((run.output_dir / "results.json").read_text())["blocks"]
    assert (block["status"], block["retry"], len(block["attempts"])) == ("passed", 1, 1)
    assert (skipped["status"], skipped["retry"]) == ("skipped", 0)


def test_a_failing_console_statement_is_traced_to_the_guides_own_line(guide_runner: Any) -> None:
    session = "# T\n\n```pycon\n>>> x = 1\n>>> def f():\n...     return x / 0\n>>> f()\n>>> (1,\n... 2 +)\n```\n"
    raised = guide_runner(session, "--dialect", "pycon")
    assert raised.returncode == 1
    # the traceback names the guide's file, line and text, the caret under the failing part
    guide = raised.guide
    assert f'File "{guide}", line 7, in <module>\n    >>> f()\n        ^^^' in raised.stdout
    assert f'File "{guide}", line 6, in f\n    ...     return x / 0\n                   ~~^~~' in raised.stdout
    broken = guide_runner(session.replace(">>> f()\n", ""), "--dialect", "pycon")
    assert f'File "{guide}", line 8\n    ... 2 +)\n' in broken.stdout and "SyntaxError: invalid syntax" in broken.stdout


def test_a_console_session_s_output_comes_in_the_order_a_console_shows_it(guide_runner: Any) -> None:
    # a pipe is no terminal: without line buffering, `a` and `c` were held back until the end, after `b` and `d`
    session = (
        "```pycon\n>>> import os, subprocess\n>>> print('a')\na\n>>> _ = subprocess.run(['echo', 'b'])\nb\n"
        ">>> print('c', end='')\n>>> _ = os.system('echo; echo d')\nc\nd\n```\n"
    )
    run = guide_runner(session, "--dialect", "pycon", env={"PYTHONUNBUFFERED": ""})  # empty: as if it were unset
    assert run.returncode == 0, run.stdout + run.stderr
