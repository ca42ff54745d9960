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


class Repo:
    """A git repository in a temporary directory, with the environment git and the drift check need."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def write(self, name: str, text: str) -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def start(self) -> str:
        """A first commit without guides: the base revision of a pull request that adds them."""
        self.write("README.md", "# Repo\n")
        return self.commit("start")

    def drift(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ci.drift", *args],
            cwd=self.path,
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def pypi() -> Iterator[WebStub]:
    with running_stub() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path, pypi: WebStub) -> Repo:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Guide Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Guide Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONPATH": str(ROOT),
        "PYPI_URL": pypi.url,
        "GUIDE_GUARD_HTTP_TIMEOUT": "0.5",
    }
    (tmp_path / "repo").mkdir()
    return Repo(tmp_path / "repo", env)


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


def test_our_own_guides_pass_the_pre_commit_hook_without_a_warning() -> None:
    """The lessons of real nights hold in the guides we ship: a finding there is fixed, not carried."""
    guides = [
        "docs/specforge.md",
        *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs/examples").glob("*.md")),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "ci.precommit", *guides], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(guides)} guides checked, nothing run: 0 errors, 0 warnings" in done.stdout + done.stderr


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


def _lessons(label: str, body: str) -> list[tuple[int, str]]:
    """The lessons' warnings on a guide of one block (with its expected output when it is a #test):
    (the line inside the block, the message)."""
    guide = f"{FENCE}shell {label}\n{body}\n{FENCE}\n"
    if label.startswith("#test id="):
        guide += f'\n{FENCE}text #test-result id="{label.split("=")[1]}"\nok\n{FENCE}\n'
    findings = static_findings(parse_guide(guide, "guide.md"), shellcheck=None)
    return [(f.line - 1, f.message) for f in findings if f.severity is Severity.WARNING]


NETWORK = "has no time or stall bound"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("git clone --depth 1 https://example.org/repo.git", 1),
        ("cd x\ngit -C x fetch --depth 1 origin v1", 2),
        ("curl -fsSL -o model.bin https://example.org/model.bin", 1),
        ("sudo -E git clone https://example.org/repo.git", 1),
        ("git submodule update --init --recursive", 1),
        # bounded by the tool's own default read timeout: pip 15 s, uv 30 s, the Hub's client 10 s, wget 900 s
        ('uv pip install --python "$(command -v python)" numpy', None),
        ("python -m pip install -r requirements.txt", None),
        ("pip install --default-timeout=60 numpy", None),
        ("wget https://example.org/model.bin", None),
        ("sudo -E hf download Qwen/Qwen3-0.6B", None),
        ("python - <<'PY'\nfrom huggingface_hub import snapshot_download\nprint(snapshot_download('a/b'))\nPY", None),
        # bounded, local, offline or not the network at all
        ("timeout 600 git clone https://example.org/repo.git", None),
        ("git -c http.lowSpeedLimit=1000 -c http.lowSpeedTime=60 clone https://example.org/repo.git", None),
        ("export GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/r.git", None),
        ("git clone ../local-copy copy && git -C copy checkout v1", None),
        ("pip install --timeout 30 numpy", None),
        ("pip install --no-index --find-links wheels numpy", None),
        ("UV_HTTP_TIMEOUT=30 uv pip install numpy", None),
        ("curl --max-time 600 -o model.bin https://example.org/model.bin", None),
        ('curl -fsS "http://127.0.0.1:$PORT/health"', None),
        # an address the block sets in a variable is read there
        ('URL=https://example.org/model.bin\ncurl -fsSL -o model.bin "$URL"', 2),
        ('HEALTH=http://127.0.0.1:8000/health\ncurl -fs "${HEALTH}"', None),
        ("wget --timeout=30 https://example.org/model.bin", None),
        ("echo 'git clone https://example.org/repo.git' # pip install numpy", None),
        # git bounds a stall only with both http.lowSpeedLimit and http.lowSpeedTime, and reads only exported variables
        ("git -c http.lowSpeedTime=60 clone https://example.org/repo.git", 1),
        ("export GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/repo.git", 2),
        ("GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/repo.git", 2),
        ("git clone https://example.org/repo.git\nexport GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60", 1),
        ("GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60 git clone https://example.org/repo.git", None),
        (
            "git config http.lowSpeedLimit 1000\ngit config http.lowSpeedTime 60\ngit clone https://example.org/r.git",
            None,
        ),
        # curl's --speed-limit alone stops a transfer slower than it for 30 s
        ("curl --speed-limit 1024 -o model.bin https://example.org/model.bin", None),
        ("curl -fsSL -Y 1024 -o model.bin https://example.org/model.bin", None),
        ("curl -fsSLm 600 -o model.bin https://example.org/model.bin", None),  # -m among the short options
    ],
)
def test_a_network_command_without_a_bound_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33254357756: a download stalled until the 90-minute limit; a git clone hung at TLS."""
    found = [(at, message) for at, message in _lessons("#test-setup", body) if NETWORK in message]
    if line is None:
        assert found == []
    else:
        assert [at for at, _ in found] == [line], found
        assert "run it as `timeout SECONDS" in found[0][1] and "33254357756" in found[0][1]


def _guide_lessons(guide: str, needle: str) -> list[tuple[int, str]]:
    """The lessons' warnings on GUIDE whose message holds NEEDLE: (the guide line, the message)."""
    findings = static_findings(parse_guide(guide, "guide.md"), shellcheck=None)
    return [(f.line, f.message) for f in findings if f.severity is Severity.WARNING and needle in f.message]


def test_a_bound_the_guide_gives_every_block_bounds_its_network_commands() -> None:
    """git's stall bound set in the front matter's ci.env, or by `git config --global` in an earlier block, holds
    for every later block: no warning there."""
    clone = f"{FENCE}shell #test-setup\ngit clone https://example.org/repo.git\n{FENCE}\n"
    both = "---\nci:\n  env:\n    GIT_HTTP_LOW_SPEED_LIMIT: '1000'\n    GIT_HTTP_LOW_SPEED_TIME: '60'\n---\n"
    assert _guide_lessons(both + clone, NETWORK) == []
    time_only = "---\nci:\n  env:\n    GIT_HTTP_LOW_SPEED_TIME: '60'\n    PIP_DEFAULT_TIMEOUT: '60'\n---\n"
    assert [line for line, _ in _guide_lessons(time_only + clone, NETWORK)] == [8]
    configure = "git config --global http.lowSpeedLimit 1000\ngit config --global http.lowSpeedTime 60"
    guide = f"{clone}\n{FENCE}shell #test-setup\n{configure}\n{FENCE}\n\n{clone}"
    # the clone before the configuration is warned about, the one after it is not
    assert [line for line, _ in _guide_lessons(guide, NETWORK)] == [2]
    # `git config` without --global sets the configuration of the repository it runs in only
    in_repository = guide.replace("--global ", "")
    assert [line for line, _ in _guide_lessons(in_repository, NETWORK)] == [2, 11]


@pytest.mark.parametrize(
    ("body", "warned"),
    [
        ("source /usr/local/Ascend/ascend-toolkit/set_env.sh\nnpu-smi info", True),
        ('. "$ASCEND_HOME_PATH/../set_env.sh"', True),
        ("echo 'source /usr/local/Ascend/ascend-toolkit/set_env.sh'", False),  # a word, not a command
        ("source venv/bin/activate", False),
    ],
)
def test_sourcing_the_cann_set_env_script_is_a_warning(body: str, warned: bool) -> None:
    """Actions run 33464343161: set_env.sh skips itself in a non-interactive shell, so ASCEND_HOME stayed empty."""
    found = [(at, m) for at, m in _lessons("#test-setup", body) if "non-interactive shell" in m]
    assert [at for at, _ in found] == ([1] if warned else [])
    assert all("ascend_toolkit_install.info" in message for _, message in found)


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('echo "downloading the model"\npython -c "print(\'/models/a\')"', 1),  # two lines stored
        ("pip install --timeout 30 modelscope\npython -c \"print('/models/a')\"", 1),  # pip writes to stdout
        ("pushd /tmp\npwd", 1),
        ("apt-get install -q -y libnuma1\necho /usr/lib", 1),  # one -q drops the progress, not the report
        ("apt-get install -qq -y libnuma1\necho /usr/lib", None),
        ('echo "downloading" >&2\npython -c "print(\'/models/a\')"', None),
        ("pip install --timeout 30 modelscope >/dev/null\npython -c \"print('/models/a')\"", None),
        ("pip install -q --timeout 30 modelscope\npython -c \"print('/models/a')\"", None),
        ("UV_HTTP_TIMEOUT=30 uv pip install modelscope\npython -c \"print('/models/a')\"", None),  # stderr
        ("if [ -d /models/a ]; then echo /models/a; else echo /models/b; fi", None),  # one branch runs
        ('test -d /m || { echo "no /m" >&2; exit 1; }\nls /m | head -1\necho done >&2', None),
        # commands that print nothing on stdout when they work, before the one that prints the value
        ("timeout 600 git clone -q https://example.org/y.git /tmp/y\necho /tmp/y", None),
        ("conda activate myenv\nsed -i 's/a/b/' /tmp/conf.txt\npython -c \"print('ok')\"", None),
    ],
)
def test_a_store_block_printing_more_than_its_value_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33507844975: the model path was stored together with the download client's progress line."""
    found = [(at, m) for at, m in _lessons('#test-setup store="model_path"', body) if "33507844975" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("`>&2`" in message for _, message in found)
    # the same commands in a block that stores nothing are fine
    assert not [m for _, m in _lessons("#test-setup", body) if "33507844975" in m]


SERVER = "nohup python -m http.server 8000 >server.log 2>&1 &\nPID=$!\n"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (SERVER + "for _ in $(seq 60); do\n  curl -fs http://127.0.0.1:8000/ && exit 0\n  sleep 1\ndone\nexit 1", 3),
        (SERVER + "until curl -fs http://127.0.0.1:8000/; do sleep 1; done", 3),
        (
            SERVER + 'for _ in $(seq 60); do\n  curl -fs http://127.0.0.1:8000/ && exit 0\n  kill -0 "$PID" || exit 1\n'
            "  sleep 1\ndone",
            None,
        ),
        (SERVER + 'while kill -0 "$PID"; do curl -fs http://127.0.0.1:8000/ && exit 0; sleep 1; done', None),
        (
            SERVER
            + 'alive() { kill -0 "$PID" 2>/dev/null; }\nuntil curl -fs http://127.0.0.1:8000/; do alive || exit 1;'
            " sleep 1; done",
            None,
        ),
        ("for _ in $(seq 60); do test -f ready && exit 0; sleep 1; done", None),  # nothing started in the background
        (SERVER + 'until curl -fs http://127.0.0.1:8000/; do [ -d /proc/"$PID" ] || exit 1; sleep 1; done', None),
        (SERVER + 'until curl -fs http://127.0.0.1:8000/; do\n  # kill -0 "$PID" || exit 1\n  sleep 1\ndone', 3),
        # the wait the timeout bounds, in a string bash runs
        (SERVER + "timeout 300 bash -c 'until curl -fs http://127.0.0.1:8000/; do sleep 1; done'", 3),
        # a loop in a function defined before the start, and called after it
        ("up() { until curl -fs http://127.0.0.1:8000/; do sleep 1; done; }\n" + SERVER + "up", 1),
        # commands run in parallel and waited for: nothing is left running when the loop starts
        (
            "hf download org/a >/dev/null &\nhf download org/b >/dev/null &\nwait\nfor m in a b; do ls $m; sleep 1; done",
            None,
        ),
    ],
)
def test_a_readiness_loop_that_never_checks_the_server_is_alive_is_a_warning(body: str, line: int | None) -> None:
    """SGLang died while starting and the health check polled /health for its whole limit."""
    found = [(at, m) for at, m in _lessons('#test id="serve"', body) if "still alive" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("started with `&` at line" in m and 'kill -0 "$PID"' in m for _, m in found)


def test_a_server_started_in_one_block_and_waited_for_in_the_next_is_watched_there() -> None:
    """The authoring tips split a long job into a block that starts it with `&` and one that waits for it: the
    waiting block's loop must ask whether the server is still alive, through a pid file (`$!` is gone there)."""
    start = f"{FENCE}shell #test-setup\nnohup python -m http.server 8000 >/tmp/server.log 2>&1 &\n{FENCE}\n\n"
    wait = "until curl -fs http://127.0.0.1:8000/; do sleep 1; done"
    waiting = f"{FENCE}shell #test-setup\n{wait}\n{FENCE}\n\n"
    retrying = f"{FENCE}shell #test-setup\nfor _ in 1 2 3; do curl -fs http://127.0.0.1:8000/ && break; sleep 5; done\n{FENCE}\n"
    ((line, message),) = _guide_lessons(start + waiting + retrying, "still alive")  # the readiness loop only
    assert line == 6 and "waits for `python -m http.server`, started with `&` at line 2 (another block)" in message
    assert "`echo $! >/tmp/PID_FILE` after the start" in message and 'kill -0 "$(cat /tmp/PID_FILE)"' in message
    watched = waiting.replace(
        wait, 'until curl -fs http://127.0.0.1:8000/; do kill -0 "$(cat /tmp/s.pid)" || exit 1; sleep 1; done'
    )
    assert _guide_lessons(start + watched + retrying, "still alive") == []
    ended = start.replace("&\n", "&\nwait\n")
    assert _guide_lessons(ended + waiting, "still alive") == []


def test_an_unwatched_server_is_named_by_its_program() -> None:
    body = "(cd srv && setsid nohup python -m http.server 8000 >server.log 2>&1 &)\nuntil curl -fs localhost:8000; do sleep 1; done"
    ((_, message),) = _lessons('#test id="serve"', body)
    assert "this loop waits for `python -m http.server`, started with `&` at line 2" in message


def test_the_fix_of_an_unwatched_server_names_the_variable_its_pid_is_in() -> None:
    unsaved = (
        "nohup python -m http.server 8000 >server.log 2>&1 &\nuntil curl -fs http://127.0.0.1:8000/; do sleep 1; done"
    )
    saved = "nohup python -m http.server 8000 >server.log 2>&1 &\nSERVER_PID=$!\n" + unsaved.split("\n")[1]
    ((_, unsaved_message),) = _lessons('#test id="serve"', unsaved)
    assert "save its pid (`PID=$!`) and fail at once" in unsaved_message
    ((_, saved_message),) = _lessons('#test id="serve"', saved)
    assert "save its pid" not in saved_message and 'kill -0 "$SERVER_PID" || { tail -50 LOG >&2' in saved_message


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("uv pip install --timeout 30 -e .\npython -c 'import pkg; print(pkg.__name__)'", 1),
        ("cd src && pip install --timeout 30 .\necho installed", 1),
        ("timeout 600 apt-get install -y libnuma1 | tail -1\necho ok", 1),
        ("set -e\npip install --timeout 30 . | tail -1\necho installed", 2),  # without pipefail, tail's status
        ("set -eo pipefail\npip install --timeout 30 . | tail -1\necho installed", None),
        ("set -euo pipefail\npip install --timeout 30 .\necho installed", None),
        ("pip install --timeout 30 . || exit 1\necho installed", None),
        ("if ! pip install --timeout 30 .; then echo failed; exit 1; fi\necho installed", None),
        ("echo start\npip install --timeout 30 .", None),  # the last command: its status is the block's
        ("set -euo pipefail; pip install --timeout 30 . | tail -1\necho installed", None),
        ("set -e\nset +e\npip install --timeout 30 .\necho installed", 3),  # errexit turned off again
        ('die() { echo "$*" >&2; exit 1; }\npip install --timeout 30 . || die "no install"\necho installed', None),
        ("trap 'echo \"failed at line $LINENO\" >&2; exit 1' ERR\npip install --timeout 30 .\necho installed", None),
        ('"$VENV/bin/pip" install --timeout 30 .\necho installed', 1),  # a pip named by a quoted path
    ],
)
def test_an_install_whose_failure_would_show_as_a_mismatch_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33467285504: the output of a failing step was compared with the expected lines."""
    found = [(at, m) for at, m in _lessons('#test id="install"', body) if "can fail and the block go on" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("set -euo pipefail" in message and "|| exit 1" in message for _, message in found)
    # a setup's failure fails the run whatever it prints: no lesson there
    assert not [m for _, m in _lessons("#test-setup", body) if "can fail and the block go on" in m]


def test_the_lessons_name_file_and_line_in_the_report_and_fail_under_strict(repo: Repo) -> None:
    base = repo.start()
    guide = f"""\
# Lessons

{FENCE}shell #test-setup
source /usr/local/Ascend/ascend-toolkit/set_env.sh
git clone https://example.org/repo.git
{FENCE}
"""
    repo.write("guide.md", guide)
    repo.commit("add")
    done = repo.drift("--base", base, "--no-pins", "guide.md")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: guide.md:4: [static] #test-setup at line 3: `source " in done.stdout, done.stdout
    assert "warning: guide.md:5: [static] #test-setup at line 3: `git clone` has no time or stall bound" in done.stdout
    strict = repo.drift("--base", base, "--no-pins", "--strict", "guide.md")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "error: guide.md:5: [static] #test-setup at line 3: `git clone` has no time or stall bound" in strict.stdout
