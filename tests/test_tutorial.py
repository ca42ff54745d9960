"""docs/tutorial.md, followed literally: its guide is docs/examples/first-guide.md, and its commands print what it shows.

The tutorial's fenced blocks are its steps, in order: the ````markdown block is the guide the reader saves as
my-guide.md; each ```bash block is commands the reader types; a ```text block right after one is what those
commands print. The test types them all in one bash session, in a fresh home, as the reader would, and compares.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ci.expect.match import matches

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"
EXAMPLE = REPO / "docs" / "examples" / "first-guide.md"
GUIDE_NAME = "my-guide.md"  # the name the tutorial saves its guide under, and its commands use
MARK = "@@tutorial-step@@"
# The folder a run keeps its outputs in, as the tutorial shows it (`full block outputs: /tmp/guide-guard/run-...`)
# and as the reader types it after that run: each reader's has another name, so the test types the one its run named.
OUTPUTS_SHOWN = re.compile(r"/tmp/guide-guard/run-\w+")
OUTPUTS_PRINTED = re.compile(r"\S*/guide-guard/run-\w+")


@dataclass(frozen=True)
class Fence:
    """A top-level fenced block of the tutorial."""

    info: str  # the info string: "bash", "text", "markdown"
    body: str  # the content, every line ending with a newline
    line: int  # 1-based line of the opening fence


@dataclass(frozen=True)
class Step:
    """Something the reader does: save the guide, or type commands (and see what the tutorial shows)."""

    commands: str | None  # the commands typed; None for saving the guide
    shown: str | None  # what the tutorial shows they print; None when it shows nothing
    line: int  # the tutorial's line of the step's block


def _fences(text: str) -> list[Fence]:
    """The tutorial's fenced blocks, read as a Markdown viewer reads them (a longer fence holds shorter ones)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    return [
        Fence(token.info.strip(), token.content, token.map[0] + 1)
        for token in tokens
        if token.type == "fence" and token.map is not None
    ]


def _steps() -> tuple[str, list[Step]]:
    """The install commands, and the steps after them."""
    fences = _fences(TUTORIAL.read_text(encoding="utf-8"))
    install, rest = fences[0], fences[1:]
    assert install.info == "bash" and "pip install" in install.body, "the tutorial starts with the install commands"
    steps: list[Step] = []
    for index, fence in enumerate(rest):
        following = rest[index + 1] if index + 1 < len(rest) else None
        shown = following.body if following is not None and following.info == "text" else None
        if fence.info == "markdown":
            steps.append(Step(None, None, fence.line))
        elif fence.info == "bash":
            steps.append(Step(fence.body, shown, fence.line))
        else:
            assert fence.info == "text" and rest[index - 1].info == "bash", (
                f"docs/tutorial.md:{fence.line}: stray block"
            )
    return install.body, steps


def _the_guide_shown() -> str:
    (guide,) = [fence.body for fence in _fences(TUTORIAL.read_text(encoding="utf-8")) if fence.info == "markdown"]
    return guide


def _normalised(log: str) -> str:
    """The log with what changes from run to run (durations, sizes, pids, the port, the output folder) made fixed."""
    log = re.sub(r"\b\d+\.\d+s\b", "0.0s", log)
    log = re.sub(r"\b\d+ B\b", "0 B", log)
    log = re.sub(r"\bpid \d+", "pid 0", log)
    log = re.sub(r"http\.server \d+", "http.server 0", log)
    return OUTPUTS_PRINTED.sub("DIR", log)


def test_the_guide_the_tutorial_shows_is_the_example_file() -> None:
    assert _the_guide_shown() == EXAMPLE.read_text(encoding="utf-8")


def test_the_tutorial_installs_as_the_readme_does() -> None:
    install, _ = _steps()
    assert install.splitlines()[0] in (REPO / "README.md").read_text(encoding="utf-8")


def test_the_tutorial_links_what_exists() -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links, "the tutorial links the reference"
    for link in links:
        assert (TUTORIAL.parent / link).is_file(), f"docs/tutorial.md links {link}, which is not there"
    authoring = (REPO / "docs" / "authoring.md").read_text(encoding="utf-8")
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    for heading, document in (
        ("### Before a commit", authoring),
        ("## Adding a guide", ci),
        ("## Another repository's guide", ci),
    ):
        title = heading.lstrip("# ")
        assert f'"{title}"' in text and f"\n{heading}" in document, f"the tutorial points to {heading!r}"


def test_following_the_tutorial_prints_what_it_shows(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """Write, check, run, break, update, run again: each command's output and exit status as the tutorial says."""
    scripts = sysconfig.get_paths()["scripts"]
    assert shutil.which("guide-guard", path=scripts), f"the guide-guard command is not installed in {scripts}"
    home, temporary = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temporary.mkdir()
    _, steps = _steps()
    log = tmp_path / "step.log"
    script = ""
    shown_outputs = ""  # the output folder the last log shown names
    for index, step in enumerate(steps):
        if step.commands is None:
            script += f"cat > {GUIDE_NAME} <<'END_OF_GUIDE'\n{_the_guide_shown()}END_OF_GUIDE\n"
            continue
        # a folder the reader types is the one the log just shown names, and the test types the one its run named
        for typed_outputs in OUTPUTS_SHOWN.findall(step.commands):
            assert typed_outputs == shown_outputs, f"docs/tutorial.md:{step.line}: lists a folder no log shown names"
        commands = OUTPUTS_SHOWN.sub('"$OUTPUTS"', step.commands)
        script += (
            f'echo "{MARK} {index} begin"\n{{\n{commands}}} >{log} 2>&1\nstatus=$?\ncat {log}\n'
            f'named=$(sed -n "s/^full block outputs: //p" {log})\n[ -z "$named" ] || OUTPUTS=$named\n'
            f'echo "{MARK} {index} end $status"\n'
        )
        shown_outputs = next(iter(re.findall(r"^full block outputs: (\S+)$", step.shown or "", re.M)), shown_outputs)
    env = {**harness_env, "HOME": str(home), "TMPDIR": str(temporary), "PATH": f"{scripts}:{harness_env['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and not done.stderr, done.stdout + done.stderr

    outputs = re.split(rf"^{MARK} \d+ (?:begin|end \d+)\n", done.stdout, flags=re.MULTILINE)[1::2]
    statuses = [int(status) for status in re.findall(rf"^{MARK} \d+ end (\d+)$", done.stdout, flags=re.MULTILINE)]
    typed = [step for step in steps if step.commands is not None]
    assert len(outputs) == len(statuses) == len(typed), done.stdout
    for step, output in zip(typed, outputs, strict=True):
        if step.shown is not None:
            assert matches(_normalised(output), _normalised(step.shown).rstrip("\n")), (
                f"docs/tutorial.md:{step.line}: the output shown is not what the commands print:\n{output}"
            )
    # mkdir; --list; the run passes; broken, it fails; its outputs listed; --update accepts the change; it passes again
    assert statuses == [0, 0, 0, 1, 0, 0, 0], done.stdout

    # The recap line the tutorial shows for the broken guide is the one the harness prints.
    broken = typed[3]
    assert broken.shown is not None and broken.commands is not None and "sed -i" in broken.commands
    (recap,) = [line for line in broken.shown.splitlines() if line.startswith("  MISMATCH ")]
    assert recap in outputs[3].splitlines()
    # --update rewrote the expected output of `fetch` and nothing else: the guide now says what the page says.
    example = EXAMPLE.read_text(encoding="utf-8")
    updated = (home / "first-guide" / GUIDE_NAME).read_text(encoding="utf-8")
    assert updated == example.replace("hello, guide", "hello, world")
    assert example.count("hello, guide") == 2  # the page written, and the output expected
