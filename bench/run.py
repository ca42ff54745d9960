"""Run every benchmark, print the summary table, and write docs/performance.md with its plots.

    python bench/run.py            # full sizes, a few minutes: docs/performance.md, docs/performance-*.png
    python bench/run.py --quick    # tiny sizes, seconds (a smoke test): written to bench/out/
    python bench/run.py --only overhead,startup --out-dir /tmp/perf
    python bench/run.py --reference DIR    # DIR: a checkout of the reference engine, compared with in `reference`

Exit status: 0 when every benchmark ran (whether or not its targets were met),
1 when one erred (a command failed, a verdict was wrong), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import machine
import matching
import memory
import overhead
import reference
import resume
import search
import startup
import timeouts
from common import REPO, CommandFailed, Section
from report import RunData, summary_rows, summary_text, write_document

BENCHMARKS = ("overhead", "reference", "matching", "memory", "timeouts", "startup", "resume", "search")


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark runs: the full run, or the quick one."""

    overhead_sizes: list[int]
    overhead_repeat: int
    matching_sizes_mb: list[int]
    matching_wildcards: list[int]
    matching_repeat: int
    throughput_regex_timeout_s: float
    adversarial_n: list[int]
    adversarial_repeats: list[int]
    adversarial_regex_timeout_s: float
    memory_mib: int
    memory_baseline_mib: int
    timeout_s: float
    grace_s: float
    timeout_repeat: int
    startup_repeat: int
    resume_scale: float  # of the resumed guide's sleeps
    resume_repeat: int
    resume_rehearsal_repeat: int  # rounds of the rehearsal resumed (0: the own guide only)
    search_sizes: list[int]  # characters of output searched (the fences dialect)
    search_repeat: int
    search_regex_timeout_s: float
    reference_sizes: list[int]  # trivial blocks run by guide-guard, the reference engine and the floor
    reference_list_sizes: list[int]  # blocks of the guides given to --list
    reference_repeat: int


FULL = Sizes(
    overhead_sizes=[50, 200, 1000],
    overhead_repeat=7,
    matching_sizes_mb=[1, 10, 100],
    matching_wildcards=[1, 10, 1000],
    matching_repeat=3,
    throughput_regex_timeout_s=60.0,
    adversarial_n=[125, 250, 500, 1000, 2000, 4000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000],
    adversarial_repeats=[1, 2, 3],
    adversarial_regex_timeout_s=10.0,
    memory_mib=1024,
    memory_baseline_mib=1024,  # about 3 GiB of peak memory for the baseline: safe on 24 GiB
    timeout_s=2.0,
    grace_s=1.0,
    timeout_repeat=3,
    startup_repeat=11,
    resume_scale=1.0,
    resume_repeat=3,
    resume_rehearsal_repeat=3,
    search_sizes=[10_000, 100_000, 1_000_000, 10_000_000],
    search_repeat=3,
    search_regex_timeout_s=20.0,
    reference_sizes=[20, 200, 1000],
    reference_list_sizes=[5000, 20000],
    reference_repeat=5,
)

QUICK = Sizes(
    overhead_sizes=[5, 20],
    overhead_repeat=1,
    matching_sizes_mb=[1],
    matching_wildcards=[1, 10],
    matching_repeat=1,
    throughput_regex_timeout_s=10.0,
    adversarial_n=[50, 100, 1000],
    adversarial_repeats=[1, 2],
    adversarial_regex_timeout_s=1.0,
    memory_mib=8,
    memory_baseline_mib=8,
    timeout_s=1.0,
    grace_s=0.2,
    timeout_repeat=1,
    startup_repeat=1,
    resume_scale=0.05,
    resume_repeat=1,
    resume_rehearsal_repeat=0,  # a round costs three rehearsals, about 40 s
    search_sizes=[1000, 10_000],
    search_repeat=1,
    search_regex_timeout_s=5.0,
    reference_sizes=[3, 5],
    reference_list_sizes=[20, 80],
    reference_repeat=1,
)


def benchmark_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(BENCHMARKS)}")
    return names


def run_all(chosen: list[str], sizes: Sizes, data: RunData, checkout: Path | None = None) -> None:
    """Run the chosen benchmarks in order, filling `data`; CommandFailed and OSError propagate.

    CHECKOUT: the reference engine's, for the reference benchmark (without it, that comparison is skipped).
    """

    def run_overhead(section: Section) -> None:
        data.overhead = overhead.run_overhead(sizes.overhead_sizes, sizes.overhead_repeat, section)

    def run_reference(section: Section) -> None:
        reference.run_reference(
            sizes.reference_sizes, sizes.reference_list_sizes, sizes.reference_repeat, checkout, section
        )

    def run_matching(section: Section) -> None:
        data.throughput = matching.run_throughput(
            sizes.matching_sizes_mb,
            sizes.matching_wildcards,
            sizes.matching_repeat,
            sizes.throughput_regex_timeout_s,
            section,
        )
        data.adversarial = matching.run_adversarial(
            sizes.adversarial_n,
            sizes.adversarial_repeats,
            sizes.adversarial_regex_timeout_s,
            sizes.matching_repeat,
            section,
        )
        matching.summarize(data.throughput, data.adversarial, section)

    def run_memory(section: Section) -> None:
        memory.run_memory(sizes.memory_mib, sizes.memory_baseline_mib, section)

    def run_timeouts(section: Section) -> None:
        timeouts.run_timeouts(sizes.timeout_s, sizes.grace_s, sizes.timeout_repeat, section)

    def run_startup(section: Section) -> None:
        startup.run_startup(sizes.startup_repeat, section)

    def run_resume(section: Section) -> None:
        resume.run_resume(sizes.resume_scale, sizes.resume_repeat, section, sizes.resume_rehearsal_repeat)

    def run_search(section: Section) -> None:
        search.run_search(sizes.search_sizes, sizes.search_repeat, sizes.search_regex_timeout_s, section)

    steps: dict[str, Callable[[Section], None]] = {
        "overhead": run_overhead,
        "reference": run_reference,
        "matching": run_matching,
        "memory": run_memory,
        "timeouts": run_timeouts,
        "startup": run_startup,
        "resume": run_resume,
        "search": run_search,
    }
    for name in chosen:
        section = Section(name.capitalize())
        print(f"\n== {section.title}", flush=True)
        started = time.monotonic()
        steps[name](section)
        print(f"({section.title.lower()} took {time.monotonic() - started:.0f} s)", flush=True)
        data.sections.append(section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the scripts (figures mean nothing)")
    parser.add_argument(
        "--only", type=benchmark_list, default=list(BENCHMARKS), help=f"some of {','.join(BENCHMARKS)} (default all)"
    )
    parser.add_argument(
        "--out-dir", type=Path, help="where performance.md and the plots go (default docs/, or bench/out/ with --quick)"
    )
    parser.add_argument(
        "--reference", type=Path, help="a checkout of cosdt-ci-test/workflows, to compare with (else skipped)"
    )
    args = parser.parse_args(argv)
    out_dir: Path = args.out_dir or (REPO / "bench" / "out" if args.quick else REPO / "docs")
    sizes = QUICK if args.quick else FULL
    command = "python bench/run.py" + (" --quick" if args.quick else "")
    if args.only != list(BENCHMARKS):
        command += f" --only {','.join(args.only)}"
    print("machine:", flush=True)
    described = machine.describe()
    for what, value in described:
        print(f"  {what}: {value}", flush=True)
    data = RunData(quick=args.quick, command=command, machine=described, load_at_end="", sections=[])
    data.throughput_regex_timeout_s = sizes.throughput_regex_timeout_s
    data.adversarial_regex_timeout_s = sizes.adversarial_regex_timeout_s
    started = time.monotonic()
    try:
        run_all(args.only, sizes, data, args.reference)
    except (CommandFailed, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    data.load_at_end = machine.load_now()
    rows = summary_rows(data.sections)
    print(f"\n== Summary (all benchmarks took {time.monotonic() - started:.0f} s)", flush=True)
    print(summary_text(rows))
    document, plots = write_document(data, out_dir)
    print(f"\nwrote {document.relative_to(REPO) if document.is_relative_to(REPO) else document}", end="")
    print("".join(f", {plot.name}" for plot in plots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
