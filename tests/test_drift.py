"""`python -m ci.drift`: checks of changed guides on pull requests, in git repositories built per test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import markdown_it
import pytest
from conftest import Repo
from github_artifacts import REPO, TOKEN, GitHubArtifacts, StoredArtifact, zip_of_directory
from web_stub import WebStub, running_stub

from ci.guide.model import Language
from ci.guide.parse import parse_guide
from ci.guide.plan import LANGUAGES
from ci.maintain.drift import (
    BlockChange,
    GitError,
    GuideDrift,
    Severity,
    console_report,
    pinned_versions,
    python_c_programs,
    python_heredocs,
    run_git,
    static_findings,
    step_summary,
)

ROOT = Path(__file__).resolve().parents[1]
FENCE = "```"

BASE_GUIDE = f"""\
# Guide

{FENCE}shell #test-setup store="where"
echo /srv/app
{FENCE}

{FENCE}shell #test id="hello" load="where>>DIR"
echo "hello from <DIR>"
echo "pid $$"
{FENCE}

{FENCE}shell #test-result id="hello" load="where>>DIR" fuzzy='NNN'
hello from <DIR>
pid NNN
{FENCE}

{FENCE}shell #test-setup
echo anonymous
{FENCE}

{FENCE}shell #test id="version"
echo "version 1.2"
{FENCE}

{FENCE}shell #test-result id="version"
version 1.2
{FENCE}

{FENCE}shell #test id="gone"
true
{FENCE}

{FENCE}shell #test-result id="gone"
{FENCE}
"""


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line that contains `needle`."""
    return next(n for n, line in enumerate(text.split("\n"), start=1) if needle in line)


def annotations(output: str) -> list[tuple[str, int, str]]:
    """(kind, line, message) of every `::error file=...,line=N,...::message` line."""
    found = []
    for match in re.finditer(r"^::(error|warning|notice) file=[^,]*,line=(\d+),[^:]*::(.*)$", output, re.M):
        found.append((match.group(1), int(match.group(2)), match.group(3)))
    return found


def test_contract_errors_are_all_reported_with_lines(repo: Repo) -> None:
    base = repo.start()
    guide = f"""\
# Broken

{FENCE}shell #test
echo no id
{FENCE}

{FENCE}ruby #test-setup
puts 1
{FENCE}

{FENCE}shell #test id="x" timeout='soon'
echo x
{FENCE}

{FENCE}shell #testing id="y"
echo y
{FENCE}
"""
    repo.write("docs/guide.md", guide)
    repo.commit("add a broken guide")
    done = repo.drift("--base", base, "--no-pins", GITHUB_ACTIONS="true")
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [(line, message) for kind, line, message in annotations(done.stdout) if kind == "error"]
    assert len(errors) == 4, errors
    assert any(line == 3 and "#test needs an id" in message for line, message in errors)
    assert any(line == 7 and "unsupported language 'ruby'" in message for line, message in errors)
    assert any(line == 11 and "bad duration 'soon'" in message for line, message in errors)
    assert any(line == 11 and "has no #test-result" in message for line, message in errors)
    assert "error: docs/guide.md:3: [contract] #test needs an id" in done.stdout
    assert "4 errors" in done.stdout
    # the same guide's warnings come with its errors
    assert [line for kind, line, _ in annotations(done.stdout) if kind == "warning"] == [15]


def test_a_forgotten_load_is_a_contract_warning_with_the_load_to_add(repo: Repo) -> None:
    base = repo.start()
    guide = f"""\
# Forgotten

{FENCE}shell #test-setup store="ref"
echo v1
{FENCE}

{FENCE}shell #test-setup
sort < /etc/hostname > /dev/null
git checkout <ref>
{FENCE}
"""
    repo.write("docs/guide.md", guide)
    repo.commit("add a guide that forgets a load")
    done = repo.drift("--base", base, "--no-pins", "docs/guide.md", GITHUB_ACTIONS="true")
    message = (
        "<ref> is left as written: no load of this block replaces it, though #test-setup store=ref at line 3 "
        'stores ref; add load="ref>>ref" to its fence at line 7'
    )
    assert f"warning: docs/guide.md:9: [contract] {message}" in done.stdout
    assert ("warning", 9, message) in annotations(done.stdout)
    assert [
        line for kind, line, text in annotations(done.stdout) if kind == "warning" and "left as written" in text
    ] == [9]
    strict = repo.drift("--base", base, "--no-pins", "--strict", "docs/guide.md")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert f"error: docs/guide.md:9: [contract] {message}" in strict.stdout


def test_static_checks_map_lines_back_to_the_guide(repo: Repo) -> None:
    base = repo.start()
    guide = f"""\
# Static

<!--
```shell #test-setup store="ref"
echo v1
```
-->

{FENCE}shell #test-setup load="ref>>ref"
if [[ "<ref>" =~ ^v ]]; then
    git checkout "<ref>"
fi
{FENCE}

{FENCE}shell #test-setup
echo start
if true; then
    echo unbalanced
{FENCE}

{FENCE}bash #test-setup
for f in $(ls); do echo "$f"; done
cd /tmp
{FENCE}

{FENCE}python #test-setup
print("fine")
def broken(:
    pass
{FENCE}

{FENCE}shell #test-setup
python - "$ARG" <<'PY'
import sys
print(sys.argv[1])
PY
python3 <<EOF
value = "$HOME"
print(value
EOF
	python3 <<-END
	ok = 1
	END
python -c 'print("single quoted, fine")'
python3 -c "import json
print(json.dumps({{\"home\": \"$HOME\"}})
"
{FENCE}
"""
    repo.write("guide.md", guide)
    repo.commit("add")
    done = repo.drift("--base", base, "--no-pins", GITHUB_ACTIONS="true")
    assert done.returncode == 1, done.stdout + done.stderr
    found = annotations(done.stdout)
    errors = [(line, message) for kind, line, message in found if kind == "error"]
    warnings = [(line, message) for kind, line, message in found if kind == "warning"]
    # bash -n: the missing `fi` is noticed at the end of the block, its closing fence
    unbalanced = line_of(guide, "echo start")
    assert any(line == unbalanced + 3 and "bash -n" in message for line, message in errors), found
    # compile(): the bad `def` of the Python block
    assert any(line == line_of(guide, "def broken") and "Python syntax error" in m for line, m in errors), found
    # the unquoted heredoc's unclosed paren; the quoted one and the <<- one compile
    heredoc = [line for line, message in errors if "Python heredoc" in message]
    assert heredoc and set(heredoc) <= {line_of(guide, "print(value"), line_of(guide, "print(value") + 1}, found
    # a multi-line `python -c "..."` with an unclosed paren, at the line the program starts (Python's own
    # line for "was never closed"); the single-quoted one compiles
    python_c = [line for line, message in errors if "(python -c)" in message]
    assert python_c == [line_of(guide, "print(json.dumps")], found
    # shellcheck: its errors fail (iterating over ls output), its warnings annotate (cd without || exit)
    assert any(line == line_of(guide, "for f in") and "SC2045" in message for line, message in errors), found
    assert any(line == line_of(guide, "cd /tmp") and "SC2164" in message for line, message in warnings), found
    # a loaded <ref> is neither a redirection for bash nor a constant for shellcheck
    first = line_of(guide, 'load="ref>>ref"')
    assert not any(first <= line <= first + 4 for line, _ in errors + warnings), found


def test_guide_text_in_the_report_issues_no_workflow_command_in_a_pull_requests_check(repo: Repo) -> None:
    """bash -n quotes the guide's line; under Actions the report around it is wrapped in stop-commands."""
    base = repo.start()
    repo.write("guide.md", f"{FENCE}shell #test-setup\nif then ##[error]from-the-author\n{FENCE}\n")
    repo.commit("a guide with an injected command")
    done = repo.drift("--base", base, "--no-pins", "guide.md", GITHUB_ACTIONS="true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bash -n: `if then ##[error]from-the-author'" in done.stdout
    lines, stopped = done.stdout.split("\n"), None
    for line in lines:  # as the runner reads them: no command inside a stop, `##[` anywhere outside one
        if stopped is not None:
            stopped = None if line == f"::{stopped}::" else stopped
        elif line.startswith("::stop-commands::"):
            stopped = line.removeprefix("::stop-commands::")
        else:
            assert line.startswith("::") or "##[" not in line, line


def test_block_diff_table_in_the_step_summary(repo: Repo, tmp_path: Path) -> None:
    repo.write("docs/guide.md", BASE_GUIDE)
    repo.write("docs/notes.md", "# Notes without labels\n")
    base = repo.commit("base")
    gone = f'{FENCE}shell #test id="gone"\ntrue\n{FENCE}\n\n{FENCE}shell #test-result id="gone"\n{FENCE}\n'
    changed = (
        BASE_GUIDE.replace('echo "version 1.2"', 'echo "version 1.3"')
        .replace("version 1.2\n```\n", "version 1.3\n```\n")
        .replace(gone, "")
        .replace("echo anonymous", "echo still anonymous")
        + f'{FENCE}shell #test-setup store="extra" timeout="5m"\necho extra\n{FENCE}\n'
    )
    repo.write("docs/guide.md", changed)
    repo.write("docs/notes.md", "# Notes without labels, edited\n")
    repo.commit("change the guide")
    summary = tmp_path / "summary.md"
    done = repo.drift("--base", base, "--no-pins", GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text()
    assert "docs/notes.md" not in text  # changed, but holds no labelled block
    version = line_of(changed, '#test id="version"')
    anonymous = line_of(changed, "echo still anonymous") - 1
    extra = line_of(changed, 'store="extra"')
    removed = line_of(BASE_GUIDE, '#test id="gone"')
    assert f"| `#test id=version` | {version} | changed | command, expected output |" in text
    assert f"| `#test-setup #1 without id or store` | {anonymous} | changed | command |" in text
    assert f"| `#test id=gone` | {removed} (base) | removed |  |" in text
    assert f"| `#test-setup store=extra` | {extra} | added |  |" in text
    assert "#test id=hello" not in text  # unchanged
    assert "Needs re-verification on hardware" in text
    assert f"changed  #test id=version, line {version} (command, expected output)" in done.stdout


def test_changed_result_is_rechecked_against_the_last_run(repo: Repo, tmp_path: Path, run_harness) -> None:
    repo.write("guide.md", BASE_GUIDE)
    base = repo.commit("base")
    artifact = tmp_path / "artifact"
    run = run_harness("guide.md", "--output-dir", str(artifact), cwd=repo.path)
    assert run.returncode == 0, run.stdout + run.stderr
    started_at = json.loads((artifact / "results.json").read_text())["guides"][0]["started_at"]

    # "hello" drifts (a line the runner never printed); "version" still matches (a wildcard instead of the patch)
    changed = BASE_GUIDE.replace("hello from <DIR>\npid NNN\n", "hello from <DIR>\npid NNN\nextra line\n").replace(
        '#test-result id="version"\nversion 1.2\n', "#test-result id=\"version\" fuzzy='NNN'\nversion 1.NNN\n"
    )
    repo.write("guide.md", changed)
    repo.commit("edit expected output")
    done = repo.drift("--base", base, "--no-pins", "--last-run", str(artifact), GITHUB_ACTIONS="true")
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [(line, message) for kind, line, message in annotations(done.stdout) if kind == "error"]
    assert len(errors) == 1, errors
    line, message = errors[0]
    assert line == line_of(changed, "extra line")  # the first expected line the runner never printed
    assert f"no longer matches what the runner printed on {started_at} (the run in {artifact})" in message
    assert "its line 3, 'extra line', was never printed: the output ended before it" in message
    assert message.endswith(f"; see python -m ci.run guide.md --update --from-run {artifact}")  # the run it read
    assert "re-checked 2 changed #test-results" in done.stdout

    # the command changed as well: only a warning, since hardware must say
    edited = changed.replace('echo "hello from <DIR>"', 'echo "hi from <DIR>"')
    repo.write("guide.md", edited)
    repo.commit("edit the command too")
    again = repo.drift("--base", base, "--no-pins", "--last-run", str(artifact), GITHUB_ACTIONS="true")
    assert again.returncode == 0, again.stdout
    found = annotations(again.stdout)
    assert any(kind == "warning" and "its command changed too" in message for kind, _, message in found), found


def test_a_result_a_resumed_run_kept_names_the_run_it_passed_in(repo: Repo, tmp_path: Path, run_harness) -> None:
    repo.write("guide.md", BASE_GUIDE)
    base = repo.commit("base")
    outputs = tmp_path / "resumed"
    run = run_harness("guide.md", "--output-dir", str(outputs), cwd=repo.path)
    assert run.returncode == 0, run.stdout + run.stderr
    # as `--resume` records a #test that passed in the run it continues: skipped here, kept from there
    record = json.loads((outputs / "results.json").read_text())
    [hello] = [block for block in record["blocks"] if block["id"] == "hello"]
    earlier = {"directory": "/runs/earlier/outputs", "started_at": "2026-12-01T03:00:00Z"}
    hello.update(status="skipped", kept_from=earlier, exit_code=None, stdout_path=None, stdout_bytes=0)
    record["resumed_from"] = earlier
    (outputs / "results.json").write_text(json.dumps(record))
    repo.write("guide.md", BASE_GUIDE.replace("hello from <DIR>\npid NNN\n", "hello from <DIR>\npid NNN\nextra\n"))
    repo.commit("edit expected output")
    done = repo.drift("--base", base, "--no-pins", "--last-run", str(outputs))
    assert done.returncode == 0, done.stdout + done.stderr
    (finding,) = [line for line in done.stdout.splitlines() if "[last run]" in line]
    assert "#test-result id=hello: not re-checked: the last run (" in finding
    assert "passed in the run in /runs/earlier/outputs (2026-12-01T03:00:00Z)" in finding
    assert "with that run's outputs as --last-run" in finding


def test_a_changed_result_quotes_what_the_runner_printed_masked_and_cut(
    repo: Repo, tmp_path: Path, run_harness
) -> None:
    secret = "s3cr3t-v4lue-9f8e"
    guide = f"""\
{FENCE}shell #test id="say"
echo "ready"
echo "token $SAY_TOKEN $(printf 'y%.0s' $(seq 300))"
{FENCE}

{FENCE}shell #test-result id="say"
ready
token ...
{FENCE}
"""
    repo.write("guide.md", guide)
    base = repo.commit("base")
    outputs = tmp_path / "last run"  # a blank: the command to run next quotes it
    run = run_harness("guide.md", "--output-dir", str(outputs), cwd=repo.path, env={"SAY_TOKEN": secret})
    assert run.returncode == 0, run.stdout + run.stderr
    repo.write("guide.md", guide.replace("token ...", "token then ..."))
    repo.commit("edit expected output")
    done = repo.drift("--base", base, "--no-pins", "--last-run", str(outputs), SAY_TOKEN=secret)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [line for line in done.stdout.splitlines() if "[last run]" in line]
    assert f"error: guide.md:{line_of(guide, 'token ...')}: [last run] #test-result id=say:" in finding
    assert "its line 2, 'token then ...', where the runner printed 'token *** yyyy" in finding
    assert secret not in done.stdout
    assert "y" * 180 + "...'" in finding and "y" * 300 not in finding  # bounded
    assert finding.endswith(f"--update --from-run '{outputs}'")


def test_pins_against_pypi(repo: Repo, pypi: WebStub) -> None:
    base = repo.start()
    pypi.set("/pypi/requests/json", {"info": {"version": "2.40.0"}})
    pypi.set("/pypi/sglang/json", {"info": {"version": "0.5.20"}})
    pypi.set("/pypi/fresh/json", {"info": {"version": "1.0"}})
    repo.write(
        "guide.md",
        f"""\
# Pins

Image: registry.example.com/team/sglang:v0.5.18-cann9.0.0-910b

{FENCE}shell #test-setup
uv pip install --upgrade \\
    'requests==2.31.0' \\
    fresh==1.0 unknown-package==0.1
echo "not a pin: x==1"
{FENCE}
""",
    )
    repo.commit("pins")
    done = repo.drift("--base", base, GITHUB_ACTIONS="true")
    assert done.returncode == 0, done.stdout + done.stderr
    notices = [(line, message) for kind, line, message in annotations(done.stdout) if kind == "notice"]
    assert (
        3,
        "image registry.example.com/team/sglang:v0.5.18-cann9.0.0-910b carries sglang 0.5.18; the latest sglang on PyPI is 0.5.20",
    ) in notices
    assert (7, "requests==2.31.0 is pinned; the latest requests on PyPI is 2.40.0") in notices
    assert any(line == 8 and "unknown-package is not on PyPI" in message for line, message in notices)
    assert not any("fresh" in message for _, message in notices)
    assert "/pypi/x/json" not in pypi.paths()


@pytest.mark.parametrize("failure", ["status", "timeout", "malformed", "unreachable"])
def test_pypi_failures_are_one_notice(repo: Repo, pypi: WebStub, failure: str) -> None:
    base = repo.start()
    reply = {
        "status": {"body": {"message": "down"}, "status": 503},
        "timeout": {"hang": True},
        "malformed": {"body": "<html>"},
        "unreachable": {"body": {}},
    }[failure]
    pypi.set("/pypi/one/json", **reply)
    pypi.set("/pypi/two/json", **reply)
    repo.write("guide.md", f"{FENCE}shell #test-setup\npip install one==1 two==2\n{FENCE}\n")
    repo.commit("pins")
    extra = {"PYPI_URL": "http://127.0.0.1:9"} if failure == "unreachable" else {}
    done = repo.drift("--base", base, **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "[pins]" in line]
    assert len(lines) == 1, done.stdout
    assert "pinned versions were not checked" in lines[0]


def test_python_heredocs() -> None:
    body = "python - a b <<'PY'\nx = 1\nPY\ncat <<EOF\nnot python\nEOF\npython3 <<-EOF\n\tprint($HOME)\n\tEOF\npython <<< 'here string'"
    assert python_heredocs(body) == [(1, "x = 1"), (7, "print(0)")]
    # unquoted: an escaped dollar stays a dollar (what bash hands to Python), `\\` is one backslash
    escaped = 'python3 <<EOF\nprint("\\$HOME is $HOME", "\\\\n")\nEOF'
    assert python_heredocs(escaped) == [(1, 'print("$HOME is 0", "\\n")')]


def test_python_c_programs() -> None:
    body = (
        "echo start\n"
        "python -c 'print(\"$HOME\")'\n"  # single quotes: as written
        'python3 -u -c "import sys\nprint(\\"$1\\", \\$x)"\n'  # double quotes: expanded, unescaped
        'python -c "$CODE"\n'  # only an expansion: nothing to check
        "python -m json.tool -c"
    )
    assert python_c_programs(body) == [(1, 'print("$HOME")'), (2, 'import sys\nprint("0", $x)')]


def test_pinned_versions() -> None:
    text = "pip install a==1.0 'b[extra]==2.0.post1'\nx==3\nuv add c==4\nimage: quay.io/org/tool:v1.2.3-cuda\nhttp://host:8080/x"
    pins = [(p.kind, p.name, p.version, p.line) for p in pinned_versions(text)]
    assert pins == [
        ("pip", "a", "1.0", 1),
        ("pip", "b", "2.0.post1", 1),
        ("pip", "c", "4", 3),
        ("image", "tool", "1.2.3", 4),
    ]


INSTALL_FORMS = [
    # (how a guide writes it, the pins found: name, version, line)
    ('"$VENV/bin/pip" install six==1.16.0', [("six", "1.16.0", 1)]),
    ('"${VENV}/bin/pip3" install six==1.16.0', [("six", "1.16.0", 1)]),
    ('"$VENV"/bin/pip install six==1.16.0', [("six", "1.16.0", 1)]),
    (".venv/bin/pip install x==1", [("x", "1", 1)]),
    ("'/opt/my venv/bin/pip' install x==1", [("x", "1", 1)]),
    ("/opt/venv/bin/python -m pip install x==1", [("x", "1", 1)]),
    ('"$(command -v python)" -m pip install x==1', [("x", "1", 1)]),
    ("python3.11 -u -X dev -m pip --quiet install x==1", [("x", "1", 1)]),
    ("uv pip install --python \"$(command -v python)\" --upgrade \\\n  'x==1' \\\n  --index-url URL", [("x", "1", 2)]),
    ("pip3.11 install x==1", [("x", "1", 1)]),
    ("pip --disable-pip-version-check -q install x==1", [("x", "1", 1)]),
    ("sudo -u ci -H pip3 install x==1", [("x", "1", 1)]),
    ("PIP_NO_CACHE_DIR=1 env -i pip install x==1", [("x", "1", 1)]),
    ("if ! pipx inject tool x==1; then exit 1; fi", [("x", "1", 1)]),
    ("uv tool install x==1 && uv add y==2", [("x", "1", 1), ("y", "2", 1)]),
    ("Install it first: `$ pip install x==1`.", [("x", "1", 1)]),
    ("Don't forget it: `pip install x==1`", [("x", "1", 1)]),
    ('$PIP install x==1 && "${VENV_PIP}" install y==2', [("x", "1", 1), ("y", "2", 1)]),
    ("$PYTHON -m pip install x==1", [("x", "1", 1)]),
    (
        "uvx ruff@0.5.0 check . && uvx --from 'black==24.1.0' black --check .",
        [("ruff", "0.5.0", 1), ("black", "24.1.0", 1)],
    ),
    ("uv tool run --with x==1,y==2 tool@3.0 --flag z==9", [("x", "1", 1), ("y", "2", 1), ("tool", "3.0", 1)]),
    ("uv run --with=x==1 --python 3.12 script.py w==4", [("x", "1", 1)]),
    # not installs, or not pins
    ('echo "pip install x==1"', []),
    ("pip uninstall x==1; pip download y==2", []),
    ("pip install -r req==1.txt --constraint c==1 -e . z", []),
    ("pip install git+https://example.invalid/o/r.git@1.2.3 && $PIP_INDEX_URL install x==1", []),
    ("uv run script.py x==1", []),
    ("pip install x>=1 # pip install y==2", []),
    ("pip install x==1 >/tmp/y==2 2>&1 || { echo z==3; }", [("x", "1", 1)]),
    ("pip install x==1 2>&1 y==2 >> log", [("x", "1", 1), ("y", "2", 1)]),
    ("cat <<'EOF' > setup.txt\npip install x==1\nEOF\npip install y==2", [("y", "2", 4)]),
    ('python -c "import x; print(x.__version__ == 1)" && pip install --upgrade pip==24.0', [("pip", "24.0", 1)]),
]


@pytest.mark.parametrize(("text", "pins"), INSTALL_FORMS, ids=[text for text, _ in INSTALL_FORMS])
def test_pins_in_every_form_of_install(text: str, pins: list[tuple[str, str, int]]) -> None:
    assert [(p.name, p.version, p.line) for p in pinned_versions(text) if p.kind == "pip"] == pins


def test_default_guides_are_changed_markdown_with_labels(repo: Repo) -> None:
    repo.write("docs/guide.md", BASE_GUIDE)
    repo.write("docs/other.md", BASE_GUIDE)
    base = repo.commit("base")
    repo.write("docs/guide.md", BASE_GUIDE + "\nMore prose.\n")
    repo.write("notes.md", "# no labels\n")
    repo.commit("prose only")
    done = repo.drift("--base", base, "--no-pins")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "=== docs/guide.md" in done.stdout
    assert "other.md" not in done.stdout and "notes.md" not in done.stdout
    assert "0 blocks need re-verification" in done.stdout


@pytest.mark.parametrize(
    ("changes", "rechecked", "said"),
    [
        (1, 1, ["1 block needs re-verification on hardware", "re-checked 1 changed #test-result against"]),
        (2, 3, ["2 blocks need re-verification on hardware", "re-checked 3 changed #test-results against"]),
    ],
)
def test_counts_in_the_report_agree_with_their_nouns(changes: int, rechecked: int, said: list[str]) -> None:
    drift = GuideDrift("guide.md", rechecked=rechecked)
    drift.changes = [BlockChange("guide.md", f"#test id=b{n}", 3 + n, "added") for n in range(changes)]
    report = console_report([drift])
    for words in said:
        assert words in report
    assert f"drift: 1 guide: 0 errors, 0 warnings, 0 notices; {said[0]}" in report
    assert said[0] in step_summary([drift])


def test_a_guide_whose_file_name_is_not_utf8_is_found_checked_and_shown_with_its_bytes_escaped(
    repo: Repo, tmp_path: Path, harness_env: dict[str, str]
) -> None:
    name = os.fsdecode(b"g-\xff.md")  # as git and the OS hand it over: the byte as a lone surrogate
    repo.start()
    repo.write(name, BASE_GUIDE)
    base = repo.commit("add a guide")
    artifact = tmp_path / "artifact"
    run = subprocess.run(
        [sys.executable, "-m", "ci.run", name, "--output-dir", str(artifact)],
        cwd=repo.path,
        env={**harness_env, "PYTHONPATH": str(ROOT)},  # this checkout's harness, run from the repository
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    repo.write(name, BASE_GUIDE.replace("hello from <DIR>\npid NNN\n", "hello from <DIR>\npid NNN\nextra line\n"))
    repo.commit("edit expected output")
    summary = tmp_path / "summary.md"
    # no guide named: found among the changed files; a strict UTF-8 console, as in most locales
    done = repo.drift(
        "--base",
        base,
        "--no-pins",
        "--last-run",
        str(artifact),
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(summary),
        PYTHONIOENCODING="utf-8",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "=== g-\\xff.md" in done.stdout
    # the last run recorded it under the same escaped name, and is found by it
    errors = [message for kind, _, message in annotations(done.stdout) if kind == "error"]
    assert len(errors) == 1 and "no longer matches what the runner printed" in errors[0], done.stdout
    # the summary is Markdown: its backslash is written escaped, and reads as the log's escaped name
    rendered = markdown_it.MarkdownIt().render(summary.read_bytes().decode("utf-8"))
    assert "g-\\xff.md" in rendered and "g-\\\\xff" not in rendered


def test_bad_base_and_missing_guide(repo: Repo) -> None:
    repo.write("guide.md", BASE_GUIDE)
    repo.commit("base")
    bad = repo.drift("--base", "no-such-rev", "--no-pins")
    assert bad.returncode == 2
    assert "[ERROR] --base no-such-rev" in bad.stderr
    missing = repo.drift("--base", "HEAD", "nope.md", "--no-pins")
    assert missing.returncode == 2
    assert "no such guide: nope.md" in missing.stderr


def test_specforge_guide_has_no_drift_errors() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ci.drift", "--base", "HEAD", "docs/specforge.md", "--no-pins"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors" in done.stdout


@pytest.fixture
def github() -> Iterator[GitHubArtifacts]:
    with running_stub() as api, running_stub() as storage:
        yield GitHubArtifacts(api, storage)


def file_annotations(output: str) -> list[tuple[str, str]]:
    """(kind, message) of every annotation on a whole file (no line)."""
    return re.findall(r"^::(error|warning|notice) file=[^,:]*,title=[^:]*::(.*)$", output, re.M)


def github_env(github: GitHubArtifacts) -> dict[str, str]:
    return {"GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": github.api.url, "GITHUB_TOKEN": TOKEN, "GH_TOKEN": ""}


def test_the_last_run_is_the_newest_artifact_of_that_name_on_github(
    repo: Repo, tmp_path: Path, run_harness, github: GitHubArtifacts
) -> None:
    repo.write("guide.md", BASE_GUIDE)
    base = repo.commit("base")
    report = tmp_path / "guide-guard-report"  # laid out as guide-run.yml uploads it
    run = run_harness("guide.md", "--output-dir", str(report / "outputs"), cwd=repo.path)
    assert run.returncode == 0, run.stdout + run.stderr
    (report / "junit.xml").write_text("<testsuites/>")
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 100, "main", "2026-04-01T18:00:00Z", b"old and gone", True))
    github.add(
        StoredArtifact(2, "specforge-npu-attempt-1", 101, "main", "2026-04-02T18:00:00Z", zip_of_directory(report))
    )
    for night in range(12):  # nights the monitor skipped upload nothing; other workflows upload their own
        github.add(
            StoredArtifact(10 + night, "coverage", 102 + night, "main", f"2026-04-{3 + night:02d}T18:00:00Z", b"")
        )

    # a pull request that changes no expected output asks GitHub nothing
    repo.write("guide.md", BASE_GUIDE.replace('echo "version 1.2"', 'echo "version 1.2"  # same'))
    repo.commit("edit a command only")
    quiet = repo.drift("--base", base, "--no-pins", "--last-run-artifact", "specforge-npu", **github_env(github))
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert github.api.requests == []

    changed = BASE_GUIDE.replace("hello from <DIR>\npid NNN\n", "hello from <DIR>\npid NNN\nextra line\n")
    repo.write("guide.md", changed)
    repo.commit("edit expected output")
    done = repo.drift(
        "--base", base, "--no-pins", "--last-run-artifact", "specforge-npu", GITHUB_ACTIONS="true", **github_env(github)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [(line, message) for kind, line, message in annotations(done.stdout) if kind == "error"]
    assert [line for line, _ in errors] == [line_of(changed, "extra line")], errors
    assert "no longer matches what the runner printed on" in errors[0][1]
    unpacked = "the outputs/ directory of artifact specforge-npu-attempt-1 of run 101 on main ("
    assert f"--update --from-run OUTPUTS, OUTPUTS being {unpacked}" in errors[0][1]  # not a directory now gone
    assert "drift: the last run is artifact specforge-npu-attempt-1 of run 101 on main (" in done.stdout
    assert "re-checked 1 changed #test-result against the last run" in done.stdout
    assert [path.split("?")[0] for path in github.storage.paths()] == ["/blob/2.zip"]


def test_without_an_artifact_the_last_run_check_is_skipped_with_a_notice(repo: Repo, github: GitHubArtifacts) -> None:
    repo.write("guide.md", BASE_GUIDE)
    base = repo.commit("base")
    changed = BASE_GUIDE.replace("hello from <DIR>\npid NNN\n", "hello from <DIR>\npid NNN\nextra line\n")
    repo.write("guide.md", changed)
    repo.commit("edit expected output")

    done = repo.drift(
        "--base", base, "--no-pins", "--last-run-artifact", "specforge-npu", GITHUB_ACTIONS="true", **github_env(github)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    notices = [message for kind, message in file_annotations(done.stdout) if kind == "notice"]
    expected = f"changed #test-result blocks are not re-checked: {REPO} has no artifact named specforge-npu-attempt-1"
    assert expected in notices

    github.forbidden = True  # a token without actions: read
    refused = repo.drift(
        "--base", base, "--no-pins", "--last-run-artifact", "specforge-npu", GITHUB_ACTIONS="true", **github_env(github)
    )
    assert refused.returncode == 0, refused.stdout + refused.stderr
    warnings = [message for kind, message in file_annotations(refused.stdout) if kind == "warning"]
    assert any("Resource not accessible by integration" in message for message in warnings), warnings

    nowhere = repo.drift("--base", base, "--no-pins", "--last-run-artifact", "specforge-npu", GITHUB_REPOSITORY="")
    assert nowhere.returncode == 2
    assert "--last-run-artifact needs GITHUB_REPOSITORY=OWNER/NAME" in nowhere.stderr
    both = repo.drift("--base", base, "--last-run", "x", "--last-run-artifact", "specforge-npu")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_a_step_summary_that_cannot_be_written_is_said_and_the_check_goes_on(repo: Repo, tmp_path: Path) -> None:
    base = repo.start()
    repo.write("guide.md", BASE_GUIDE)
    repo.commit("add the guide")
    not_a_file = tmp_path / "summary-dir"
    not_a_file.mkdir()
    done = repo.drift("--base", base, "--no-pins", GITHUB_STEP_SUMMARY=str(not_a_file))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"[ERROR] the step summary could not be written to {not_a_file}" in done.stderr
    assert "=== guide.md" in done.stdout and "0 errors" in done.stdout


def test_the_shellcheck_installed_with_the_harness_comes_before_one_on_path(repo: Repo, tmp_path: Path) -> None:
    other = tmp_path / "other-bin"
    other.mkdir()
    # SIMULATION of another shellcheck earlier on PATH (an old system package, say) that cannot check
    fake = other / "shellcheck"
    fake.write_text("#!/bin/sh\necho 'not the harness s shellcheck' >&2\nexit 3\n")
    fake.chmod(0o755)
    base = repo.start()
    guide = f"{FENCE}shell #test-setup\ncd /tmp\n{FENCE}\n"
    repo.write("guide.md", guide)
    repo.commit("add the guide")
    done = repo.drift("--base", base, "--no-pins", GITHUB_ACTIONS="true", PATH=f"{other}:{repo.env['PATH']}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(kind, line) for kind, line, message in annotations(done.stdout) if "SC2164" in message] == [("warning", 2)]
    assert "not the harness" not in done.stdout


def test_a_shellcheck_that_hangs_is_a_notice(tmp_path: Path) -> None:
    hung = tmp_path / "shellcheck"
    # SIMULATION of a shellcheck stuck on a block: a real one cannot be made to hang on purpose
    hung.write_text("#!/bin/sh\nexec sleep 600\n")
    hung.chmod(0o755)
    parsed = parse_guide(f"# G\n\n{FENCE}shell #test-setup\necho fine\n{FENCE}\n", "guide.md")
    findings = static_findings(parsed, shellcheck=str(hung), shellcheck_timeout_s=1)
    [finding] = findings  # bash -n found nothing wrong
    assert (finding.severity, finding.line) == (Severity.NOTICE, 3)
    assert "shellcheck could not check it: it did not finish in 1s" in finding.message


def test_git_that_hangs_is_a_git_error(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other-bin"
    other.mkdir()
    # SIMULATION of a git waiting on something (a lock, a prompt) that never comes
    (other / "git").write_text("#!/bin/sh\nexec sleep 600\n")
    (other / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:{os.environ['PATH']}")
    with pytest.raises(GitError, match=r"^git rev-parse --show-toplevel did not finish in 1s$"):
        run_git("rev-parse", "--show-toplevel", cwd=str(repo.path), timeout_s=1)


@pytest.mark.parametrize("word", sorted(LANGUAGES))
def test_every_language_the_contract_accepts_is_checked(word: str) -> None:
    broken = "def broken(:\n    pass" if LANGUAGES[word] is Language.PYTHON else "if true; then\n    echo unbalanced"
    parsed = parse_guide(f"# G\n\n{FENCE}{word.upper()} #test-setup\n{broken}\n{FENCE}\n", "guide.md")
    findings = static_findings(parsed, shellcheck=None)
    assert [f.severity for f in findings] == [Severity.ERROR], findings


UPSTREAM_GUIDE = f"""\
# An upstream guide: plain fences, no labels

{FENCE}shell
echo "version 1.2.3"
{FENCE}

{FENCE}text
version 1.2.x
{FENCE}

{FENCE}shell
git checkout <UPSTREAM_REF>
{FENCE}
"""

REGISTRY = """\
guides:
  - name: upstream
    guide: docs/upstream.md
    runner: [ubuntu-latest]
    dialect: fences
"""


def test_a_guide_of_another_dialect_is_found_and_checked_in_the_dialect_it_runs_in(repo: Repo) -> None:
    """The registry's dialect, the front matter's and --dialect choose how a changed guide is read: the steps that
    dialect runs are statically checked (a skipped fence is not) and diffed step by step against the base."""
    repo.write("guides.yaml", REGISTRY)
    repo.write("docs/upstream.md", UPSTREAM_GUIDE)
    repo.write("docs/console.md", "---\nci:\n  dialect: pycon\n---\n\n```pycon\n>>> x = 1\n```\n")
    base = repo.commit("base")
    changed = UPSTREAM_GUIDE.replace(
        "# An upstream guide: plain fences, no labels\n", "# Upstream\n\n```shell\necho first\n```\n"
    )
    changed = changed.replace("version 1.2.x", "version 1.x")
    changed += f'\n{FENCE}shell\necho "unclosed\n{FENCE}\n\n{FENCE}shell skip\nif then fi\n{FENCE}\n'
    repo.write("docs/upstream.md", changed)
    console = (
        "---\nci:\n  dialect: pycon\n---\n\n```pycon\n>>> x = 1\n>>> print(x\n>>> for i in (1,\n...     2): pass\n```\n"
    )
    repo.write("docs/console.md", console)
    repo.write("docs/notes.md", '# Notes\n\n```shell\necho unclosed"\n```\n')  # no dialect: labels, nothing to run
    repo.commit("change")

    done = repo.drift("--base", base, "--no-pins")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "notes.md" not in done.stdout
    unclosed = line_of(changed, 'echo "unclosed')
    assert f"error: docs/upstream.md:{unclosed}: [static] shell fence at line {unclosed - 1}: bash -n:" in done.stdout
    upstream_errors = [line for line in done.stdout.splitlines() if line.startswith("error: docs/upstream.md")]
    assert all(f":{unclosed}:" in line or f":{unclosed + 1}:" in line for line in upstream_errors), upstream_errors
    statement = line_of(console, "print(x")
    assert (
        f"error: docs/console.md:{statement}: [static] pycon statement at line {statement}: Python syntax error:"
        in (done.stdout)
    )
    assert f"docs/console.md:{statement + 1}" not in done.stdout  # the statement continued over two lines compiles
    # the fence inserted first is one step added; the others are paired with theirs, one's expected output changed
    assert f"  added    shell fence, line {line_of(changed, 'echo first') - 1}\n" in done.stdout
    assert f"  changed  shell fence, line {line_of(changed, 'version 1.2.3') - 1} (expected output)\n" in done.stdout
    assert f"  added    shell fence, line {unclosed - 1}\n" in done.stdout
    assert f"  added    shell skip fence, line {line_of(changed, 'if then fi') - 1}\n" in done.stdout
    assert "checkout" not in done.stdout  # <UPSTREAM_REF> is a value, not a redirection, to bash -n
    assert f"  added    pycon statement, line {statement}\n" in done.stdout

    noted = repo.drift("--base", base, "--no-pins", "--last-run", str(repo.path), "docs/upstream.md")
    assert (
        "notice: docs/upstream.md: [last run] changed expected outputs of a guide read as fences are not re-checked"
        " against the last run"
    ) in noted.stdout
    # --dialect wins over the registry: read as the label contract, the upstream guide has nothing to check
    labels = repo.drift("--base", base, "--no-pins", "--dialect", "labels", "docs/upstream.md")
    assert labels.returncode == 0, labels.stdout + labels.stderr
    assert "0 errors" in labels.stdout and "0 blocks need re-verification" in labels.stdout
    # no registry: the upstream guide is no guide, the one whose front matter names its dialect still is
    alone = repo.drift("--base", base, "--no-pins", "--registry", "none.yaml")
    assert "upstream.md" not in alone.stdout and "=== docs/console.md" in alone.stdout, alone.stdout
    assert repo.drift("--base", base, "--dialect", "fence").returncode == 2
