"""The pre-commit hook: its manifest as pre-commit reads it, and its entry on the staged files of a git repository."""

# The entry is run as pre-commit runs it: in the repository's top directory, with the staged file names
# as arguments. A real `pre-commit run` of the manifest's hook is run too, as a local hook (`language:
# system`, the entry's module run by this interpreter): `pre-commit try-repo` of the `language: python`
# hook would pip install guide-guard and its dependencies into a fresh environment first, which needs
# the network and takes minutes.

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from outside import unavailable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / ".pre-commit-hooks.yaml"
FENCE = "```"

BROKEN = f"""
# Broken

{FENCE}shell #test id=four
touch "$RAN"
echo 4
{FENCE}

{FENCE}shell #test-setup timout="5"
touch "$RAN"
{FENCE}
"""

GOOD = f"""
# Good

{FENCE}shell #test-setup store="greeting"
touch "$RAN"; echo hello
{FENCE}

{FENCE}shell #test id="greet" load="greeting>>GREETING"
echo "<GREETING> world"
{FENCE}

{FENCE}text #test-result id="greet"
hello world
{FENCE}
"""

# A forgotten load: a warning, which fails the commit (pre-commit would hide it, were it to pass).
WARNED = f"""
{FENCE}shell #test-setup store="port"
echo 8080
{FENCE}

{FENCE}shell #test-setup
echo "<port>"
{FENCE}
"""

# Markdown that is no guide: code blocks, none labelled.
NOTES = f"""
# Notes

{FENCE}shell
touch "$RAN"
{FENCE}
"""


def _pre_commit() -> Any:
    try:
        import pre_commit.clientlib
    except ModuleNotFoundError:
        unavailable("pre-commit is not installed", "Install the test extra: pip install -e '.[test]'.")
    return pre_commit.clientlib


def _hook() -> dict[str, Any]:
    """The manifest's one hook, as pre-commit's own schema loader reads (and checks) it."""
    (hook,) = _pre_commit().load_manifest(str(MANIFEST))
    return dict(hook)


def _entry() -> str:
    """The hook's entry, read as plain YAML: the tests of the entry itself need no pre-commit."""
    (hook,) = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return str(hook["entry"])


def _script_target(entry: str) -> tuple[str, str]:
    """The module and function of the console script ENTRY, as pyproject.toml declares it."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert entry in scripts, f"the hook's entry {entry!r} is not a console script of pyproject.toml: {sorted(scripts)}"
    module, _, function = scripts[entry].partition(":")
    return module, function


def test_the_manifest_is_valid_for_pre_commit_and_names_our_console_script() -> None:
    hook = _hook()
    assert hook["id"] == "guide-guard-check"
    assert hook["language"] == "python"  # pre-commit installs the repository, console scripts and all
    assert hook["types"] == ["markdown"] and hook["pass_filenames"]
    module, function = _script_target(hook["entry"])
    imported = __import__(module, fromlist=[function])
    assert callable(getattr(imported, function))


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A new git repository with nothing committed."""
    top = tmp_path / "repo"
    top.mkdir()
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    return top


def _stage(top: Path, files: dict[str, str]) -> list[str]:
    """Write and `git add` FILES; the staged names, as pre-commit passes them."""
    for name, text in files.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    subprocess.run(["git", "add", "--", *files], cwd=top, check=True)
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z"], cwd=top, check=True, capture_output=True, text=True
    )
    return [name for name in staged.stdout.split("\0") if name]


def _run_entry(top: Path, names: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook's entry run as its console script would be: in the repository, with the staged names."""
    module, function = _script_target(_entry())
    script = f"import sys; from {module} import {function}; sys.exit({function}())"
    return subprocess.run(
        [sys.executable, "-c", script, *names],
        cwd=top,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_broken_guide_fails_the_hook_naming_file_and_line(repository: Path, harness_env: dict[str, str]) -> None:
    ran = repository.parent / "ran"
    names = _stage(repository, {"docs/broken.md": BROKEN, "docs/good.md": GOOD})
    done = _run_entry(repository, names, {**harness_env, "RAN": str(ran)})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "error: docs/broken.md:3: [contract] unquoted value in 'id=four': write id=\"four\"" in lines
    assert "error: docs/broken.md:3: [contract] #test id='four' has no #test-result id='four'; add one" in done.stdout
    assert any(line.startswith("error: docs/broken.md:8: [contract] unknown parameter 'timout'") for line in lines)
    assert "did you mean timeout=" in done.stdout
    assert (
        lines[-1]
        == "guide-guard: 2 guides checked, nothing run: 3 errors, 0 warnings; fix the errors above before committing"
    )
    assert "docs/good.md" not in done.stdout  # nothing to say about it
    assert not ran.exists()  # no block ran
    assert "Traceback" not in done.stderr


def test_a_guide_whose_only_labels_are_near_misses_fails_the_hook(
    repository: Path, harness_env: dict[str, str]
) -> None:
    """A label glued to its language or typed in full-width characters is no label: the guide is still one, and
    the hook says so, as --list does, rather than pass it by as Markdown with no guide in it."""
    glued = "```bash#test-setup\nexit 1\n```\n"
    full_width = "```shell \N{FULLWIDTH NUMBER SIGN}test-setup\nexit 1\n```\n"
    names = _stage(repository, {"docs/glued.md": glued, "docs/full-width.md": full_width})
    done = _run_entry(repository, names, harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "error: docs/glued.md:1: [contract] 'bash#test-setup' is not a label, so this block would be ignored;"
        " did you mean ```bash #test-setup?" in done.stdout
    )
    assert "error: docs/full-width.md:1: [contract] '\N{FULLWIDTH NUMBER SIGN}test-setup' is not a label" in done.stdout
    assert "typed in full-width characters" in done.stdout


def test_a_good_guide_and_markdown_that_is_no_guide_pass(repository: Path, harness_env: dict[str, str]) -> None:
    ran = repository.parent / "ran"
    names = _stage(repository, {"docs/good.md": GOOD, "README.md": NOTES})
    done = _run_entry(repository, names, {**harness_env, "RAN": str(ran)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "README.md" not in done.stdout  # not a guide: not a word about it
    assert done.stdout.splitlines()[-1] == "guide-guard: 1 guide checked, nothing run: 0 errors, 0 warnings; no error"
    assert not ran.exists()


def test_a_warning_fails_the_hook_so_that_pre_commit_shows_it(repository: Path, harness_env: dict[str, str]) -> None:
    """pre-commit prints the output of a failing hook only: a forgotten load that passed would never be read."""
    names = _stage(repository, {"docs/good.md": GOOD, "docs/warned.md": WARNED})
    done = _run_entry(repository, names, harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    warning = "warning: docs/warned.md:6: [contract] <port> is left as written"
    assert warning in done.stdout and 'add load="port>>port"' in done.stdout
    assert done.stdout.splitlines()[-1] == (
        "guide-guard: 2 guides checked, nothing run: 0 errors, 1 warning; fix the warnings above before committing"
    )


def test_the_lessons_of_real_nights_fail_the_hook_with_file_line_and_fix(
    repository: Path, harness_env: dict[str, str]
) -> None:
    """A server waited for without asking whether it is alive (SGLang died while starting), and the model path
    stored beside a progress line (Actions run 33507844975): warnings on their lines, the hook fails."""
    guide = f"""\
{FENCE}shell #test-setup store="model_path"
touch "$RAN"
echo "downloading the model"
echo /models/tiny
{FENCE}

{FENCE}shell #test-setup
nohup python3 -m http.server 8000 >server.log 2>&1 &
until (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null; do sleep 1; done
{FENCE}
"""
    ran = repository.parent / "ran"
    names = _stage(repository, {"docs/lessons.md": guide})
    done = _run_entry(repository, names, {**harness_env, "RAN": str(ran)})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    stored = next(line for line in lines if line.startswith("warning: docs/lessons.md:3: [static]"))
    assert "2 commands print to it (`echo` at line 3, `echo` at line 4)" in stored and "`>&2`" in stored
    waited = next(line for line in lines if line.startswith("warning: docs/lessons.md:9: [static]"))
    assert "started with `&` at line 8, but never checks that it is still alive" in waited
    assert 'kill -0 "$PID"' in waited
    assert lines[-1] == (
        "guide-guard: 1 guide checked, nothing run: 0 errors, 2 warnings; fix the warnings above before committing"
    )
    assert not ran.exists()


def test_a_guide_is_read_as_it_runs_by_the_lessons(repository: Path, harness_env: dict[str, str]) -> None:
    """git's stall bound given to every block in the front matter is no warning; a server started in one block
    and waited for in the next without asking whether it is alive is, at the loop's line, with the pid-file fix."""
    guide = f"""\
---
ci:
  env: {{GIT_HTTP_LOW_SPEED_LIMIT: "1000", GIT_HTTP_LOW_SPEED_TIME: "60"}}
---

{FENCE}shell #test-setup
git clone https://example.org/repo.git "$RAN"
nohup python3 -m http.server 8000 >/tmp/server.log 2>&1 &
{FENCE}

{FENCE}shell #test-setup
until curl -fs http://127.0.0.1:8000/; do sleep 1; done
{FENCE}
"""
    ran = repository.parent / "ran"
    names = _stage(repository, {"docs/serve.md": guide})
    done = _run_entry(repository, names, {**harness_env, "RAN": str(ran)})
    assert done.returncode == 1, done.stdout + done.stderr
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, done.stdout
    assert warnings[0].startswith("warning: docs/serve.md:12: [static] #test-setup at line 11: this loop waits for ")
    assert "started with `&` at line 8 (another block), but never checks that it is still alive" in warnings[0]
    assert "`echo $! >/tmp/PID_FILE` after the start" in warnings[0]
    assert 'kill -0 "$(cat /tmp/PID_FILE)" || { tail -50 LOG >&2; exit 1; }' in warnings[0]
    assert not ran.exists()


def test_markdown_with_no_guide_at_all_passes_without_a_word(repository: Path, harness_env: dict[str, str]) -> None:
    names = _stage(repository, {"README.md": NOTES, "CHANGES.md": "# Changes\n"})
    done = _run_entry(repository, names, harness_env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_registered_guide_is_checked_even_without_a_label(repository: Path, harness_env: dict[str, str]) -> None:
    registry = "guides:\n  - name: notes\n    guide: docs/notes.md\n    runner: [ubuntu-latest]\n"
    names = _stage(repository, {"docs/notes.md": NOTES, "guides.yaml": registry})
    done = _run_entry(repository, [name for name in names if name.endswith(".md")], harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: docs/notes.md: [contract] no runnable block, so there is nothing to check" in done.stdout


def test_a_guide_of_another_dialect_is_checked_in_it(repository: Path, harness_env: dict[str, str]) -> None:
    """The registry entry's dialect, the front matter's and --dialect say how a file is read, as in ci.run: its
    steps are checked (a pycon statement that does not compile fails), and it is a guide when it runs something."""
    registry = "guides:\n  - name: notes\n    guide: docs/notes.md\n    runner: [ubuntu-latest]\n    dialect: fences\n"
    console = "---\nci:\n  dialect: pycon\n---\n\n```pycon\n>>> print('a'\n```\n"
    broken = "# Loose\n\n```shell\nif true; then\n```\n"
    files = {"docs/notes.md": NOTES, "guides.yaml": registry, "docs/console.md": console, "docs/loose.md": broken}
    names = [name for name in _stage(repository, files) if name.endswith(".md")]
    done = _run_entry(repository, names, harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "docs/notes.md" not in done.stdout and "docs/loose.md" not in done.stdout  # fine; no guide in labels
    assert "error: docs/console.md:7: [static] pycon statement at line 7: Python syntax error:" in done.stdout
    assert "2 guides checked, nothing run: 1 error, 0 warnings" in done.stdout.splitlines()[-1]

    fences = _run_entry(repository, ["--dialect", "fences", *names], harness_env)
    assert "error: docs/loose.md:5: [static] shell fence at line 3: bash -n: syntax error" in fences.stdout, (
        fences.stdout
    )
    assert "3 guides checked" in fences.stdout.splitlines()[-1]


def test_pre_commit_itself_runs_the_hook_on_the_staged_guides(
    repository: Path, tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """A real `pre-commit run`, with the manifest's hook as a local one (see the note at the top)."""
    _pre_commit()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    hook = _hook()
    module, _ = _script_target(hook["entry"])
    local = {
        "id": hook["id"],
        "name": hook["name"],
        "entry": f"{sys.executable} -m {module}",
        "language": "system",
        "types": hook["types"],
    }
    config = yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]})
    _stage(repository, {".pre-commit-config.yaml": config, "docs/broken.md": BROKEN, "README.md": NOTES})
    env = {**harness_env, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "RAN": str(tmp_path / "ran")}
    env.pop("PRE_COMMIT", None)
    command = [sys.executable, "-m", "pre_commit", "run", "--color", "never"]
    done = subprocess.run(command, cwd=repository, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "guide-guard contract check" in done.stdout and "Failed" in done.stdout
    assert "error: docs/broken.md:3: [contract] unquoted value in 'id=four'" in done.stdout
    assert not (tmp_path / "ran").exists()
    # fixed and staged again, the commit may go
    _stage(repository, {"docs/broken.md": GOOD})
    done = subprocess.run(command, cwd=repository, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guide-guard contract check" in done.stdout and "Passed" in done.stdout
    assert os.path.isdir(tmp_path / "pre-commit-home")


def test_staged_names_with_a_leading_dash_blanks_or_accents_are_files(
    repository: Path, harness_env: dict[str, str]
) -> None:
    """pre-commit passes the names after the hook's args, without `--`: `-x.md` is a file, not an option."""
    names = _stage(repository, {"-x.md": BROKEN, "-h.md": GOOD, "docs/a guide é.md": BROKEN})
    done = _run_entry(repository, ["--no-static", *names], harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: -x.md:3: [contract] unquoted value in 'id=four'" in done.stdout
    assert "error: docs/a guide é.md:3: [contract] unquoted value in 'id=four'" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("guide-guard: 3 guides checked, nothing run: 6 errors")
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("registry", "problem"),
    [
        ("guides: [\n", "guides.yaml:2: [registry] not valid YAML: "),
        (
            "guides:\n  - guide: docs/notes.md\n    runer: [ubuntu-latest]\n",
            "guides.yaml:3: [registry] unknown key 'runer'",
        ),
    ],
    ids=["not-yaml", "bad-entry"],
)
def test_a_broken_registry_fails_the_hook_saying_where(
    repository: Path, harness_env: dict[str, str], registry: str, problem: str
) -> None:
    """Which files are guides depends on the registry: one that cannot be read would let them pass unchecked."""
    names = _stage(repository, {"docs/notes.md": NOTES, "guides.yaml": registry})
    done = _run_entry(repository, [name for name in names if name.endswith(".md")], harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: {problem}" in done.stdout
    assert "(the guides it names may go unchecked; python -m ci.registry guides.yaml --check checks it whole)" in (
        done.stdout
    )
    assert done.stdout.splitlines()[-1].endswith("fix the errors above before committing")
    assert "Traceback" not in done.stderr


def test_an_unclosed_last_fence_of_a_plain_fence_guide_fails_the_hook_at_its_line(
    repository: Path, harness_env: dict[str, str]
) -> None:
    """Read as prose, the last ```shell fence would never run (its ```text never be checked): the hook refuses it."""
    files = {
        "docs/shell.md": "# T\n\n```shell\necho hi\n```\n\n```shell\nexit 1\n",
        "docs/text.md": "# T\n\n```shell\necho hi\n```\n\n```text\nbye\n",
    }
    done = _run_entry(repository, ["--dialect", "fences", *_stage(repository, files)], harness_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "docs/shell.md:7: [contract] this ```shell fence is never closed, so its commands never run" in done.stdout
    assert "docs/text.md:7: [contract] this ```text fence is never closed, so the output it expects" in done.stdout
    # a guide whose one ```shell fence is unclosed is still a guide: it is checked, not passed unread
    alone = _stage(repository, {"docs/alone.md": "# T\n\n```shell\nexit 1\n"})
    done = _run_entry(repository, ["--dialect", "fences", *alone], harness_env)
    assert done.returncode == 1 and "docs/alone.md:3: [contract] this ```shell fence is never closed" in done.stdout
