"""Write docs/commands.md, the command-line reference, from each command's own `--help`.

Run from the repository root, or from anywhere, with the environment guide-guard is installed in:

    python docs/make_commands.py            # rewrite docs/commands.md
    python docs/make_commands.py --check    # exit 1 when docs/commands.md is not what it would write

Each command's help is taken by running `python -m MODULE --help` in a subprocess, so the page is
whatever the parsers say, with the terminal fixed: COLUMNS=100, no colour, UTF-8. The one layout of
argparse that changed between the Python versions guide-guard supports, an option with a short and a
long name and a value (`-o OUTPUT, --output OUTPUT` up to 3.12, `-o, --output OUTPUT` from 3.13), is
pinned to the older form, so that the page is the same on every supported Python.
tests/test_command_reference.py fails when the page and the parsers disagree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "commands.md"
COLUMNS = "100"

# (installed command, module run with python -m, what it is for); the order of the page
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("guide-guard", "ci.run", "run guides (also `python -m ci`)"),
    ("guide-guard-rehearse", "ci.rehearse", "a guide against simulations of its machine (docs/rehearsal.md)"),
    ("guide-guard-monitor", "ci.monitor", "is a scheduled run needed (docs/monitor-and-drift.md)"),
    ("guide-guard-drift", "ci.drift", "the pull-request check of guides (docs/monitor-and-drift.md)"),
    ("guide-guard-pre-commit", "ci.precommit", "the pre-commit hook guide-guard-check (docs/authoring.md)"),
    ("guide-guard-registry", "ci.registry", "the guide registry and the status board (docs/ci.md)"),
    ("guide-guard-job", "ci.github.job", "what a workflow's job does around the harness (docs/ci.md)"),
    ("guide-guard-secrets", "ci.github.secrets", "a job's named secrets for the guide's run (docs/ci.md)"),
    ("guide-guard-release", "ci.github.release", "what the release workflow checks (docs/ci.md)"),
    (
        "guide-guard-runner-service",
        "ci.github.runner_service",
        "keeps a self-hosted runner registered (docs/runners.md)",
    ),
    ("", "ci.report.timeline", "a run's timeline as a PNG (docs/reading-a-run.md)"),
)

# Runs MODULE as `python -m MODULE` does (runpy, argv[0] the module's file), with argparse's
# option-invocation layout pinned to the one of Python 3.10 to 3.12.
_SHIM = """
import argparse, runpy, sys

def _invocation(self, action):
    if not action.option_strings:
        (metavar,) = self._metavar_formatter(action, self._get_default_metavar_for_positional(action))(1)
        return metavar
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    value = self._format_args(action, self._get_default_metavar_for_optional(action))
    return ", ".join(f"{option} {value}" for option in action.option_strings)

argparse.HelpFormatter._format_action_invocation = _invocation
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

_SUBCOMMAND = re.compile(r"^ {4}([a-z][a-z-]*)(?: |$)")


def _environment() -> dict[str, str]:
    keep = {name: value for name, value in os.environ.items() if name in {"PATH", "HOME", "TMPDIR", "SYSTEMROOT"}}
    return {
        **keep,
        "COLUMNS": COLUMNS,
        "LINES": "50",
        "NO_COLOR": "1",
        "PYTHON_COLORS": "0",
        "TERM": "dumb",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONPATH": str(ROOT),
    }


def command_help(module: str, *words: str) -> str:
    """What `python -m MODULE [WORDS] --help` prints, trailing blanks taken off each line."""
    done = subprocess.run(
        [sys.executable, "-c", _SHIM, module, *words, "--help"],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"python -m {module} {' '.join(words)} --help failed ({done.returncode}):\n{done.stderr}")
    return "\n".join(line.rstrip() for line in done.stdout.strip("\n").splitlines())


def subcommands(text: str) -> list[str]:
    """The subcommands a help lists under its COMMAND positional (guide-guard-job's prepare, stop...)."""
    lines = text.splitlines()
    if "  COMMAND" not in lines:
        return []
    found = []
    for line in lines[lines.index("  COMMAND") + 1 :]:
        if not line.strip():
            break
        match = _SUBCOMMAND.match(line)
        if match:
            found.append(match.group(1))
    return found


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _block(heading: str, text: str) -> list[str]:
    fence = _fence(text)
    return [heading, "", f"{fence}text", text, fence, ""]


def page() -> str:
    """docs/commands.md as the parsers say it."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        helps = list(pool.map(command_help, [module for _, module, _ in COMMANDS]))
        nested = [
            (module, word) for (_, module, _), text in zip(COMMANDS, helps, strict=True) for word in subcommands(text)
        ]
        nested_helps = dict(zip(nested, pool.map(lambda pair: command_help(*pair), nested), strict=True))
    lines = [
        "# Command-line reference",
        "",
        "<!-- Written by `python docs/make_commands.py` from each command's own `--help`; do not edit by hand:",
        "     tests/test_command_reference.py fails when this page and the commands disagree. -->",
        "",
        "Every command of guide-guard, with the help it prints (`--help`), so that this page and the",
        "commands cannot disagree. Each installed command is the same as its `python -m` spelling. What",
        "the options do in depth: [authoring.md](authoring.md) (writing a guide),",
        "[reading-a-run.md](reading-a-run.md) (a run's log and reports, its exit status, resuming it) and",
        "[guarantees.md](guarantees.md) (what you can rely on).",
        "",
        "| command | the same as | for |",
        "| --- | --- | --- |",
    ]
    for installed, module, purpose in COMMANDS:
        lines.append(f"| {f'`{installed}`' if installed else '(none)'} | `python -m {module}` | {purpose} |")
    lines.append("")
    for (installed, module, _), text in zip(COMMANDS, helps, strict=True):
        name = installed or f"python -m {module}"
        lines += _block(f"## {name} (python -m {module})" if installed else f"## {name}", text)
        for word in subcommands(text):
            lines += _block(f"### {name} {word}", nested_helps[(module, word)])
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = page()
    if argv == ["--check"]:
        if PAGE.read_text(encoding="utf-8") != text:
            print("docs/commands.md is out of date: run `python docs/make_commands.py`", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
