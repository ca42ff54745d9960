"""A block cannot forge the verdict: the runner's files and workflow commands are the harness's alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflows import read_github_output

FENCE = "```"

# A failing block that tries every way into the runner's files: a `verdict=passed` left without a line
# end, a heredoc opened with the delimiter the harness once used, an HTML comment left open in the summary,
# a forged table after it, a variable and a PATH entry for the steps after this one.
FORGING_GUIDE = f"""
{FENCE}shell #test-setup id="forge"
printf 'verdict=passed' >> "$GITHUB_OUTPUT"
printf 'counts<<GUIDE_GUARD_EOF_0\\n' >> "$GITHUB_OUTPUT"
printf '<!--\\n' >> "$GITHUB_STEP_SUMMARY"
printf '### ✅ guide.md: passed\\n' >> "$GITHUB_STEP_SUMMARY"
echo 'LD_PRELOAD=/tmp/forged.so' >> "$GITHUB_ENV"
echo '/tmp/forged-bin' >> "$GITHUB_PATH"
exit 3
{FENCE}
"""


def _runner_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        name: tmp_path / "runner" / name
        for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH")
    }
    (tmp_path / "runner").mkdir()
    for path in files.values():
        path.write_text("", encoding="utf-8")
    return files


def _outside_code_blocks(markdown: str) -> str:
    """MARKDOWN without its fenced code blocks (what GitHub renders as Markdown and HTML)."""
    kept, fence = [], None
    for line in markdown.split("\n"):
        opening = re.match(r"(`{3,})", line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


def test_a_block_cannot_forge_the_verdict_through_the_runners_files(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _runner_files(tmp_path)
    env = {"GITHUB_ACTIONS": "true", **{name: str(path) for name, path in files.items()}}
    run = guide_runner(FORGING_GUIDE, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    outputs = read_github_output(files["GITHUB_OUTPUT"].read_text(encoding="utf-8"))
    assert outputs["verdict"] == "failed" and json.loads(outputs["counts"]) == {"failed": 1}
    summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")
    rendered = _outside_code_blocks(summary)
    assert "guide.md: failed" in rendered and "<!--" not in rendered and ": passed" not in rendered
    assert "### ✅ guide.md: passed" in summary  # what the block wrote is shown, as text
    # nothing reaches the steps after this one
    assert files["GITHUB_ENV"].read_text(encoding="utf-8") == files["GITHUB_PATH"].read_text(encoding="utf-8") == ""
    # what the block wrote is kept, in the run's own copies, and the log says where
    private = run.output_dir / "actions-files"
    assert (private / "GITHUB_ENV").read_text(encoding="utf-8") == "LD_PRELOAD=/tmp/forged.so\n"
    assert (private / "GITHUB_OUTPUT").read_text(encoding="utf-8").startswith("verdict=passed")
    assert "warning: blocks wrote to $GITHUB_OUTPUT" in run.stderr and str(private / "GITHUB_ENV") in run.stderr


def test_the_harness_outputs_start_on_a_line_of_their_own(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _runner_files(tmp_path)
    files["GITHUB_OUTPUT"].write_text("earlier=kept", encoding="utf-8")  # the step's own script, before the harness
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(files["GITHUB_OUTPUT"])}
    run = guide_runner(FORGING_GUIDE, env=env)
    outputs = read_github_output(files["GITHUB_OUTPUT"].read_text(encoding="utf-8"))
    assert run.returncode == 1 and outputs["earlier"] == "kept" and outputs["verdict"] == "failed"


def test_a_guides_html_quoted_in_the_step_summary_stays_text(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A mismatch's note quotes the guide's expected line: HTML there would end the table and add a verdict
    # of its own, an entity would draw an icon, a link would take the reader elsewhere.
    from markdown_it import MarkdownIt

    files = _runner_files(tmp_path)
    forged = "</td></tr></table><h3>&#x2705; guide.md: passed</h3> [details](https://example.com) `x|y`"
    guide = f'{FENCE}shell #test id="t"\necho x\n{FENCE}\n\n{FENCE}shell #test-result id="t"\n{forged}\n{FENCE}\n'
    run = guide_runner(guide, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(files["GITHUB_STEP_SUMMARY"])})
    assert run.returncode == 1, run.stdout + run.stderr
    summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")
    rendered = MarkdownIt("commonmark").enable("table").render(summary.split("\n```mermaid", 1)[0])
    assert rendered.count("<h3>") == 1 and "<a " not in rendered and "&#x2705;" not in rendered, rendered
    cells = re.findall(r"<td>(.*?)</td>", rendered)
    assert len(cells) == 9 and cells[-1].endswith(
        "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;h3&gt;&amp;#x2705; guide.md: passed&lt;/h3&gt; [details](https://example.com) `x|y`'"
    ), cells


def test_the_delimiter_of_a_step_output_cannot_be_guessed() -> None:
    from ci.report.github import output_entry

    delimiters = {output_entry("failing", "a\nb").split("\n", 1)[0] for _ in range(3)}
    assert len(delimiters) == 3 and not any(d.endswith("GUIDE_GUARD_EOF_0") for d in delimiters)


def runner_commands(log: str) -> list[str]:
    """The workflow commands the Actions runner reads in LOG outside stop-commands: `::command::` at a line start
    (blanks before it skipped), the older `##[command]` anywhere in a line."""
    commands, stopped_by = [], None
    for line in log.split("\n"):
        if stopped_by is not None:
            stopped_by = None if line == f"::{stopped_by}::" else stopped_by
        elif line.startswith("::stop-commands::"):
            stopped_by = line.removeprefix("::stop-commands::")
        elif line.lstrip().startswith("::") or "##[" in line:
            commands.append(line)
    return commands


COMMANDING_GUIDE = f"""
{FENCE}shell #test-setup store="##[error]forged" skip="##[warning]no data ::error::here"
echo x
{FENCE}

{FENCE}shell #test id="::error::a" load="##[error]forged>>P"
echo <P>
{FENCE}

{FENCE}shell #test-result id="::error::a"
x
{FENCE}
"""


def test_list_under_actions_issues_no_workflow_command_the_guide_holds(run_harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "guide.md").write_text(COMMANDING_GUIDE.lstrip(), encoding="utf-8")
    actions = {"GITHUB_ACTIONS": "true"}
    listed = run_harness("guide.md", "--list", env=actions)
    assert listed.returncode == 0, listed.stderr
    assert runner_commands(listed.stdout) == [] and "store=##[error]forged" in listed.stdout
    as_json = run_harness("guide.md", "--list", "--format", "json", env=actions)
    assert as_json.returncode == 0 and runner_commands(as_json.stdout) == []
    entries = json.loads(as_json.stdout)  # still JSON, with the same values
    assert (entries[0]["store"], entries[0]["skip"]) == ("##[error]forged", "##[warning]no data ::error::here")
    assert json.loads(run_harness("guide.md", "--list", "--format", "json").stdout) == entries


def test_list_commands_under_actions_issues_no_workflow_command_a_body_or_a_value_holds(
    run_harness, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    guide = f"""\
{FENCE}shell #test id="say" load="note>>NOTE"
cat <<'EOF'
::error::forged by a body
##[warning]forged too <NOTE>
EOF
{FENCE}

{FENCE}text #test-result id="say"
...
{FENCE}
"""
    (tmp_path / "guide.md").write_text(guide, encoding="utf-8")
    # a secret --set value: a run registers it with ::add-mask::, a listing issues no command at all
    given = ["--list", "--commands", "--set", "note=::notice::x ##[error]y", "--set", "DB_PASSWORD=pw-1234-abcd"]
    actions = {"GITHUB_ACTIONS": "true"}
    listed = run_harness("guide.md", *given, env=actions)
    assert listed.returncode == 0, listed.stderr
    assert runner_commands(listed.stdout) == [] and runner_commands(listed.stderr) == []
    assert "      ::error::forged by a body" in listed.stdout  # shown, inside stop-commands
    assert "##[warning]forged too ::notice::x ##[error]y" in listed.stdout
    as_json = run_harness("guide.md", *given, "--format", "json", env=actions)
    assert as_json.returncode == 0 and runner_commands(as_json.stdout) == []
    (entry,) = json.loads(as_json.stdout)
    assert entry["command"].endswith("##[warning]forged too ::notice::x ##[error]y\nEOF")


def test_a_value_whose_setup_ran_and_failed_says_what_became_of_that_setup(guide_runner) -> None:  # type: ignore[no-untyped-def]
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="early" timeout="1"
        sleep 30
        {FENCE}

        {FENCE}shell #test-setup store="late"
        echo half; exit 4
        {FENCE}

        {FENCE}shell #test-setup store="never" skip="no GPU here"
        echo x
        {FENCE}

        {FENCE}shell #test id="use" load="early>>E" load="late>>L" load="never>>N"
        echo <E> <L> <N>
        {FENCE}

        {FENCE}shell #test-result id="use"
        x
        {FENCE}
        """,
        "--keep-going",
        "--grace",
        "1",
    )
    message = run.block("use")["message"]
    assert run.block("use")["status"] == "error" and "did not run" not in message
    assert "early was never stored: its setup early (line 1) timed out (timed out after 1s" in message
    assert "late was never stored: its setup late (line 5) failed (exit 4)" in message
    assert "never was never stored: its setup never (line 9) was skipped (no GPU here)" in message


def test_lines_that_differ_only_in_characters_a_reader_cannot_see_do_not_look_alike(guide_runner) -> None:  # type: ignore[no-untyped-def]
    # a soft hyphen, a left-to-right mark, a variation selector, a combining accent after `e` (drawn as `é`)
    run = guide_runner(
        f"""
        {FENCE}shell #test id="greet"
        printf 'hel\\xc2\\xadlo \\xe2\\x80\\x8eworld \\xe2\\x9d\\xa4\\xef\\xb8\\x8f cafe\\xcc\\x81\\n'
        {FENCE}

        {FENCE}shell #test-result id="greet"
        hello world \u2764 caf\u00e9
        {FENCE}
        """
    )
    assert run.returncode == 1, run.stdout
    assert "\n+hel<U+00AD>lo <U+200E>world \u2764<U+FE0F> cafe<U+0301>\n" in run.stdout, run.stdout
    assert "\n-hello world \u2764 caf\u00e9\n" in run.stdout
    named = "<U+00AD> (soft hyphen), <U+200E> (left-to-right mark), <U+FE0F> (variation selector-16), <U+0301> (combining acute accent)"
    assert (
        f"differs from it only in characters that look like nothing or like others: {named}"
        in run.block("greet")["message"]
    )


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("a\u200bb\u2060c\ufeff", "a<U+200B>b<U+2060>c<U+FEFF>"),  # zero-width
        ("\u202eabc\u2066d\u2069", "<U+202E>abc<U+2066>d<U+2069>"),  # bidirectional controls
        ("x\U000e0041\u034fy", "x<U+E0041><U+034F>y"),  # a tag character, the combining grapheme joiner
        ("\u2800a\u3000b\u3164", "<U+2800>a<U+3000>b<U+3164>"),  # blanks that are not spaces
        ("\u212b \u0041\u030a", "<U+212B> A<U+030A>"),  # the Angstrom sign and A + ring: both drawn as Å
        (
            "caf\u00e9 \u0928\u092e\u0938\u094d\u0924\u0947",
            "caf\u00e9 \u0928\u092e\u0938\u094d\u0924\u0947",
        ),  # as drawn
    ],
)
def test_what_cannot_be_seen_is_written_out(line: str, shown: str) -> None:
    from ci.expect.visible import show_invisible

    assert show_invisible(line) == shown


LONG_COMMENT = "#" + "x" * (200 * 1024)  # longer than any single argument of a program may be (128 KiB)


def test_a_body_longer_than_a_command_line_can_hold_runs_as_a_shorter_one_does(guide_runner) -> None:  # type: ignore[no-untyped-def]
    run = guide_runner(
        f"""
        {FENCE}shell #test id="sh"
        echo start
        {LONG_COMMENT}
        cat; nosuchcommand
        echo done
        {FENCE}

        {FENCE}shell #test-result id="sh"
        start
        done
        {FENCE}

        {FENCE}python #test id="py"
        import sys
        {LONG_COMMENT}
        print(repr(sys.stdin.read()), sys.path[0] == "")
        {FENCE}

        {FENCE}python #test-result id="py"
        '' True
        {FENCE}
        """
    )
    assert run.statuses() == {"sh": "passed", "py": "passed"}, run.stdout
    stderr = Path(run.output_dir, run.block("sh")["stderr_path"]).read_text(encoding="utf-8")
    assert "line 3: nosuchcommand: command not found" in stderr  # the body's own line numbers


def test_an_environment_too_large_to_start_a_block_says_so(guide_runner) -> None:  # type: ignore[no-untyped-def]
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            HUGE: "{"y" * (200 * 1024)}"
        ---

        {FENCE}shell #test-setup id="big"
        echo hi
        {FENCE}
        """
    )
    message = run.block("big")["message"]
    assert run.block("big")["status"] == "error" and "[Errno" not in message
    assert "Argument list too long): its environment holds" in message and "HUGE alone 200.0 KiB" in message


def _wait_for(condition, what: str, timeout_s: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_update_from_a_run_still_writing_its_directory_is_refused(tmp_path: Path, run_harness, harness_env) -> None:  # type: ignore[no-untyped-def]
    guide = tmp_path / "guide.md"
    waiting = f'{FENCE}shell #test id="t"\nwhile [ ! -e go ]; do sleep 0.05; done; echo new\n{FENCE}\n\n'
    guide.write_text(waiting + f'{FENCE}shell #test-result id="t"\nold\n{FENCE}\n', encoding="utf-8")
    (tmp_path / "go").touch()
    assert run_harness("guide.md", "--output-dir", "out").returncode == 1  # a finished run: a mismatch, new
    (tmp_path / "go").unlink()
    command = [sys.executable, "-m", "ci.run", "guide.md", "--output-dir", "out"]
    writing = subprocess.Popen(command, cwd=tmp_path, env=harness_env, stdout=subprocess.DEVNULL)
    try:
        _wait_for(lambda: (tmp_path / "out" / "harness.pid").exists(), "the second run to hold out/")
        refused = run_harness("guide.md", "--update", "--from-run", "out")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert (
            f"a run (pid {writing.pid}) is still writing" in refused.stderr and "nothing was updated" in refused.stderr
        )
        assert "\nold\n" in guide.read_text(encoding="utf-8")
    finally:
        (tmp_path / "go").touch()
        writing.wait(timeout=60)
    (tmp_path / "out" / "harness.pid").write_text("999999999\n", encoding="ascii")  # as a run killed with -9 leaves it
    left = run_harness("guide.md", "--update", "--from-run", "out")
    assert left.returncode == 2 and "killed before it finished" in left.stderr, left.stderr
    (tmp_path / "out" / "harness.pid").unlink()
    assert run_harness("guide.md", "--update", "--from-run", "out").returncode == 0
    assert "\nnew\n" in guide.read_text(encoding="utf-8")


def test_mask_files_masks_what_blocks_wrote_to_the_runners_files(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _runner_files(tmp_path)
    secret = "s3cr3t-value-4242"
    env = {"GITHUB_ENV": str(files["GITHUB_ENV"]), "DEPLOY_TOKEN": secret}
    guide = f'{FENCE}shell #test-setup id="env"\necho "TOKEN=$DEPLOY_TOKEN" >> "$GITHUB_ENV"\n{FENCE}\n'
    run = guide_runner(guide, "--mask-files", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (run.output_dir / "actions-files" / "GITHUB_ENV").read_text(encoding="utf-8") == "TOKEN=***\n"


def test_an_error_line_quoting_what_the_user_gave_issues_no_workflow_command(run_harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "guide.md").write_text(COMMANDING_GUIDE.lstrip(), encoding="utf-8")
    done = run_harness("guide.md", "--set", "##[error]forged", env={"GITHUB_ACTIONS": "true"})
    assert done.returncode == 2 and "--set '##[error]forged': write NAME=VALUE" in done.stderr
    assert runner_commands(done.stdout + done.stderr) == []


def test_a_usage_error_quoting_the_command_line_issues_no_workflow_command(run_harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # argparse's own errors quote what was typed as it is (`unrecognized arguments: ...`): a workflow passing
    # an input from a pull request's title, say, as an argument
    (tmp_path / "guide.md").write_text(COMMANDING_GUIDE.lstrip(), encoding="utf-8")
    done = run_harness("guide.md", "--no-such-option", "x\n::error::forged", env={"GITHUB_ACTIONS": "true"})
    assert done.returncode == 2 and "unrecognized arguments: --no-such-option x\n::error::forged" in done.stderr
    assert runner_commands(done.stdout + done.stderr) == []
