"""Time from SIGTERM to the harness's exit when a run has left hundreds of detached processes; old code beside.

Each run is one guide of two blocks: the first starts N `setsid sleep 1000`
(each its own session, so only the run's marker and the harness's
subreaper adoption tie them to the run) and exits; the second notes that it
is running and sleeps. SIGTERM comes then: the harness ends the second
block, then at teardown finds and ends the N sleepers, writes its reports
and exits 143. The table shows, for each N, the time from the signal to
the exit, the exit status, whether results.json and the JUnit report were
written and how many sleepers were left running.

With `--against REV` the same runs are made with the `ci` package of that
revision (extracted with `git archive` into a temporary directory), interleaved
with this tree's, and printed beside them: finding the run's processes one
by one (a whole /proc scan per process) grows with the square of N, one
scan for all of them linearly. The growth exponent is
log(t2/t1)/log(n2/n1) between the two largest N: about 1 is linear, 2 quadratic.

    python bench/leftovers.py [--counts 100,300,1000] [--repeat 3] [--against REV]
"""

from __future__ import annotations

import argparse
import io
import math
import signal
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, int_list, interleaved, median, verdict
from signals import FENCE, TARGET_S, Situation, StopTiming, run_once

THIS_TREE = "this tree"
LIMIT_S = 900.0  # after the signal; the old code needed about 36 s for 1000 sleepers on 2 shared cores


def leftovers_situation(count: int) -> Situation:
    """A block that leaves `count` detached sleepers, then one that waits for the signal."""

    def guide(work: Path) -> str:
        return (
            f"{FENCE}shell #test-setup\nfor i in $(seq {count}); do\n"
            f"  setsid sleep 1000 < /dev/null > /dev/null 2>&1 &\n  echo $! >> {work}/pids\ndone\n{FENCE}\n\n"
            f"{FENCE}shell #test-setup\necho up > {work}/ready\nsleep 1000\n{FENCE}\n"
        )

    return Situation(f"{count} leftovers", guide, "ready", (signal.SIGTERM,))


def extract_revision(revision: str, into: Path) -> str:
    """The `ci` package of a git revision, extracted into `into`; the revision's short name."""
    try:
        short = subprocess.run(
            ["git", "rev-parse", "--short", f"{revision}^{{commit}}"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", short, "ci"], cwd=REPO, check=True, capture_output=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise CommandFailed(f"--against {revision}: git says: {exc.stderr.strip()}") from None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return short


def growth_exponent(points: list[tuple[int, float]]) -> str:
    """log(t2/t1)/log(n2/n1) between the two largest n, or '-' when it cannot be told."""
    if len(points) < 2 or min(points[-2][1], points[-1][1]) <= 0:
        return "-"
    (n1, t1), (n2, t2) = points[-2:]
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def cell(runs: list[StopTiming]) -> str:
    """exit status, reports, left running and median (worst) seconds of one code's runs."""
    times = [run.exit_after_s for run in runs]
    codes = "/".join(str(code) for code in sorted({run.exit_status for run in runs}))
    reports = "all" if all(run.reports for run in runs) else "MISSING"
    left = max(run.left_running for run in runs)
    return f"{codes:>5} {reports:>8} {left:>5} {f'{median(times):.2f} ({max(times):.2f})':>15}"


def measure(
    counts: list[int], codes: dict[str, Path], grace_s: float, repeat: int, tmp: Path
) -> dict[tuple[int, str], list[StopTiming]]:
    """Every count with every code, the codes interleaved round by round."""
    timings: dict[tuple[int, str], list[StopTiming]] = {}

    def runner(count: int, label: str, code_dir: Path) -> Callable[[int], float]:
        situation = leftovers_situation(count)
        work = tmp / f"work-{len(timings)}"
        work.mkdir()
        runs = timings.setdefault((count, label), [])

        def run(_: int) -> float:
            runs.append(run_once(situation, grace_s, work, code_dir=code_dir, limit_s=LIMIT_S))
            return runs[-1].exit_after_s

        return run

    for count in counts:
        interleaved({label: runner(count, label, code_dir) for label, code_dir in codes.items()}, repeat)
    return timings


def seconds(runs: list[StopTiming]) -> float:
    return median([run.exit_after_s for run in runs])


def report(
    counts: list[int], labels: list[str], timings: dict[tuple[int, str], list[StopTiming]], section: Section
) -> None:
    """The table, code beside code; a summary row for this tree; each code's growth exponent."""
    width = len(cell([StopTiming(0.0, 0, True, 0)]))
    ratio = len(labels) > 1
    section.line(f"{'':>9}" + "".join(f" | {label:^{width}}" for label in labels) + (" | old/new" if ratio else ""))
    columns = f"{'exit':>5} {'reports':>8} {'left':>5} {'signal -> exit':>15}"
    section.table(f"{'leftovers':>9}" + f" | {columns}" * len(labels) + (" | " + " " * 7 if ratio else ""))
    for count in counts:
        line = f"{count:>9}" + "".join(f" | {cell(timings[count, label])}" for label in labels)
        if ratio:
            new, old = seconds(timings[count, labels[0]]), seconds(timings[count, labels[1]])
            line += f" | {f'{old / new:.1f}x' if new > 0 else '-':>7}"
        section.line(line)
        ours = timings[count, THIS_TREE]
        worst = max(run.exit_after_s for run in ours)
        met = worst <= TARGET_S and all(run.reports and run.left_running == 0 for run in ours)
        section.summary.append(
            SummaryRow(
                "leftovers",
                f"SIGTERM with {count} detached leftovers -> harness exited",
                f"{seconds(ours):.2f} s (worst {worst:.2f} s)",
                "",
                "",
                f"<= {TARGET_S:g} s",
                verdict(met),
            )
        )
    section.line()
    for label in labels:
        exponent = growth_exponent([(count, seconds(timings[count, label])) for count in counts])
        section.line(f"{label}: growth exponent {exponent} (1 = linear, 2 = quadratic)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--counts", type=int_list, default=[100, 300, 1000], help="leftover processes per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per count and code (default 3)")
    parser.add_argument("--grace", type=float, default=10.0, help="--grace of the runs in seconds (default 10)")
    parser.add_argument("--against", metavar="REV", help="also run the `ci` package of this git revision, beside")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.grace < 0:
        parser.error("--repeat must be at least 1 and --grace not negative")
    section = Section("Leftovers")
    try:
        with tempfile.TemporaryDirectory(prefix="gg-leftovers-") as name:
            tmp = Path(name)
            codes = {THIS_TREE: REPO}
            if args.against:
                (tmp / "old").mkdir()
                codes[extract_revision(args.against, tmp / "old")] = tmp / "old"
            timings = measure(args.counts, codes, args.grace, args.repeat, tmp)
        section.line(
            f"--grace {args.grace:g}; seconds from SIGTERM to the harness's exit; median (worst) of {args.repeat}"
        )
        report(args.counts, list(codes), timings, section)
    except (CommandFailed, OSError, subprocess.TimeoutExpired) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
