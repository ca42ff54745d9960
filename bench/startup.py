"""Start-up time of `python -m ci.run --help` and `--list docs/specforge.md`, with and without cached bytecode.

Each command runs `--repeat` times, interleaved with the others; medians are
kept. `python -c pass` is the interpreter's own floor on this machine. The
`precompiled` rows run the same commands against a copy of the `ci` package
whose bytecode was compiled beforehand (`python -m compileall`): an editable
install under PYTHONDONTWRITEBYTECODE=1 (as on this machine) never caches it,
so every start compiles the harness's sources again; the difference is what
compiling at install time would save. Target: `--help` under 300 ms.

    python bench/startup.py [--repeat 11]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, interleaved, median, precompiled_copy, run_timed, verdict

TARGET_HELP_S = 0.3
GUIDE = REPO / "docs" / "specforge.md"


@dataclass(frozen=True)
class StartupResult:
    """Median wall seconds per command."""

    medians: dict[str, float]
    bytecode_cached: bool  # whether the repository's ci/ already had compiled bytecode to use


def bytecode_cached() -> bool:
    """True when starting from the repository would find compiled bytecode for ci/ (nothing to compile)."""
    cache = REPO / "ci" / "__pycache__"
    return cache.is_dir() and any(cache.glob("run.*.pyc"))


def run_startup(repeat: int, section: Section) -> StartupResult:
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="gg-startup-") as tmp:
        copy = precompiled_copy(Path(tmp))

        def command(argv: list[str], cwd: Path) -> Callable[[int], float]:
            return lambda _: run_timed(argv, cwd=cwd, log=copy / "last.log").wall_s

        runs = {
            "python -c pass": command([python, "-c", "pass"], REPO),
            "--help": command([python, "-m", "ci.run", "--help"], REPO),
            "--help, precompiled": command([python, "-m", "ci.run", "--help"], copy),
            f"--list {GUIDE.relative_to(REPO)}": command([python, "-m", "ci.run", "--list", str(GUIDE)], REPO),
            f"--list {GUIDE.relative_to(REPO)}, precompiled": command(
                [python, "-m", "ci.run", "--list", str(GUIDE)], copy
            ),
        }
        samples = interleaved(runs, repeat)
    medians = {name: median(values) for name, values in samples.items()}
    cached = bytecode_cached()
    dont_write = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    section.line(
        f"median of {repeat}, interleaved; PYTHONDONTWRITEBYTECODE={'set' if dont_write else 'unset'};"
        f" ci/ bytecode {'cached' if cached else 'not cached: every start compiles ci/*.py'}"
    )
    section.table(f"{'command':<56} {'wall ms':>8}")
    for name, value in medians.items():
        shown = name if name == "python -c pass" else f"python -m ci.run {name}"
        section.line(f"{shown:<56} {value * 1000:>8.1f}")
    help_s = medians["--help"]
    list_name = f"--list {GUIDE.relative_to(REPO)}"
    section.summary.append(
        SummaryRow(
            "startup",
            "python -m ci.run --help",
            f"{help_s * 1000:.0f} ms",
            f"python -c pass {medians['python -c pass'] * 1000:.0f} ms",
            "",
            f"< {TARGET_HELP_S * 1000:.0f} ms",
            verdict(help_s < TARGET_HELP_S),
        )
    )
    section.summary.append(
        SummaryRow(
            "startup",
            f"python -m ci.run {list_name}",
            f"{medians[list_name] * 1000:.0f} ms",
            f"precompiled {medians[list_name + ', precompiled'] * 1000:.0f} ms",
            f"{medians[list_name] / medians[list_name + ', precompiled']:.2f}x",
            "",
            "",
        )
    )
    return StartupResult(medians, cached)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="runs per command; the median is kept (default 11)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        run_startup(args.repeat, Section("Startup"))
    except (CommandFailed, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
