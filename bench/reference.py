"""guide-guard against the reference engine at N trivial blocks, with the bash floor; `--list` of a very large guide.

The reference engine (cosdt-ci-test/workflows, `src/workflows/markdown_doc_test_base.py`)
is loaded from a checkout given with `--reference DIR` and driven as its own
projects drive it: a unittest test case subclassing its base class, whose one
test calls `run_template()` on the guide, run by `unittest.main()` in its own
interpreter. It needs mistune (`pip install mistune`). Without `--reference`
its column reads `-` and the comparison is skipped with a line that says so.
No code of it is copied here: the driver below only imports it from DIR.

For each N (`--sizes`, default 20,200,1000) a guide of N trivial `#test` blocks
(`echo hello I`, expected `hello I`, as in bench/overhead.py) is run three ways,
each timed as a whole command, interpreter start included:

  floor   one `bash -c BODY` process per block from a bash loop, stdout to a new file
  R       the reference, run through unittest on the same guide
  ours    `python -m ci.run GUIDE --output-dir TMP`

Then `python -m ci.run --list GUIDE` on guides of `--list-sizes` blocks
(default 5000,20000): reading and checking a guide should be linear in its
size (target: t(20,000 blocks) within 5 times t(5,000 blocks)).

Each repetition (`--repeat`, default 5) runs every command once, order
rotating; medians are kept. Between consecutive N's, (t2 - t1) / (N2 - N1) is
each tool's marginal cost per block; its start-up is t(N) less N times that.
Targets (issue 38, reported, never enforced): ours/R < 1 at every N, and
ours' per-block cost within 0.3 ms of the floor's.

    python bench/reference.py --reference DIR [--sizes 20,200,1000] [--list-sizes 5000,20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, int_list, interleaved, median, run_timed, verdict
from overhead import block_bodies, write_bash_loop, write_guide

REFERENCE_MODULE = Path("src") / "workflows" / "markdown_doc_test_base.py"
TARGET_OVERHEAD_MS = 0.3  # ours' per-block cost over the floor's
TARGET_LIST_GROWTH = 5.0  # t(--list of the largest) / t(--list of the smallest), for 4x the blocks
FLOOR, REFERENCE, OURS = "floor", "R", "ours"

# Run as `python -c DRIVER CHECKOUT GUIDE`: the reference's own way, a TestCase whose test calls run_template().
REFERENCE_DRIVER = r"""
import sys, unittest
checkout, guide = sys.argv[1], sys.argv[2]
sys.path.insert(0, checkout + "/src")
from workflows.markdown_doc_test_base import MarkdownDocTestBase

class GuideTest(MarkdownDocTestBase, unittest.TestCase):
    def pre_process(self):
        with open(guide, encoding="utf-8") as handle:
            return handle.read()

    def test_runs_doc(self):
        self.run_template()

unittest.main(argv=[sys.argv[0]])
"""


@dataclass(frozen=True)
class ReferenceResult:
    """Median wall seconds per block count and per `--list` size."""

    medians: dict[int, dict[str, float]]  # N -> floor / R / ours -> seconds
    list_medians: dict[int, float]  # blocks in the guide -> seconds of --list
    reference_ran: bool


def reference_problem(checkout: Path | None) -> str | None:
    """Why the reference cannot run (a line to print), or None when it can."""
    if checkout is None:
        return "reference: not given (--reference DIR, a checkout of cosdt-ci-test/workflows); its column shows -"
    if not (checkout / REFERENCE_MODULE).is_file():
        return f"reference: {checkout} has no {REFERENCE_MODULE}; give a checkout of cosdt-ci-test/workflows"
    if importlib.util.find_spec("mistune") is None:
        return "reference: needs mistune, not installed here (pip install mistune); its column shows -"
    return None


def measure_blocks(count: int, repeat: int, work: Path, checkout: Path | None) -> dict[str, float]:
    """Median wall seconds of the floor, the reference (when given) and ours on `count` trivial blocks."""
    here = work / f"n{count}"
    here.mkdir()
    blocks = block_bodies(count)
    guide = here / "guide.md"
    write_guide(guide, blocks)
    (here / "floor-out").mkdir()
    loop = here / "loop.sh"
    write_bash_loop(loop, blocks, here / "floor-out")
    log = here / "last.log"
    runs: dict[str, Callable[[int], float]] = {
        FLOOR: lambda _: run_timed(["bash", str(loop)], cwd=here, log=log).wall_s,
        # a fresh output directory each time, as in a real run
        OURS: lambda attempt: (
            run_timed(
                [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(here / f"out-{attempt}")],
                cwd=REPO,
                log=log,
            ).wall_s
        ),
    }
    if checkout is not None:
        driver = [sys.executable, "-c", REFERENCE_DRIVER, str(checkout), str(guide)]
        runs[REFERENCE] = lambda _: run_timed(driver, cwd=here, log=log).wall_s
    samples = interleaved(runs, repeat)
    return {name: median(values) for name, values in samples.items()}


def measure_list(sizes: list[int], repeat: int, work: Path) -> dict[int, float]:
    """Median wall seconds of `--list` on guides of each size, interleaved."""
    runs: dict[str, Callable[[int], float]] = {}
    for count in sizes:
        guide = work / f"list-{count}.md"
        write_guide(guide, block_bodies(count))
        argv = [sys.executable, "-m", "ci.run", "--list", str(guide)]
        runs[str(count)] = lambda _, argv=argv: run_timed(argv, cwd=REPO, log=work / "list.log").wall_s
    samples = interleaved(runs, repeat)
    return {int(name): median(values) for name, values in samples.items()}


def per_block_ms(medians: dict[int, dict[str, float]], name: str) -> list[tuple[int, int, float]]:
    """(N1, N2, ms per block) between consecutive sizes."""
    sizes = sorted(count for count, times in medians.items() if name in times)
    return [
        (first, second, 1000 * (medians[second][name] - medians[first][name]) / (second - first))
        for first, second in itertools.pairwise(sizes)
    ]


def run_reference(
    sizes: list[int], list_sizes: list[int], repeat: int, checkout: Path | None, section: Section
) -> ReferenceResult:
    """Measure, print the tables into `section`, add its summary rows; CommandFailed on errors."""
    problem = reference_problem(checkout)
    if problem is not None:
        section.line(problem)
        checkout = None
    section.line(f"median of {repeat} run(s) each, interleaved; wall time of the whole command, interpreter included")
    section.table(f"{'N':>6} {'floor s':>9} {'R s':>9} {'ours s':>9} {'ours/R':>8} {'ours/floor':>11}")
    medians: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gg-reference-") as tmp:
        for count in sizes:
            times = medians[count] = measure_blocks(count, repeat, Path(tmp), checkout)
            reference = times.get(REFERENCE)
            shown = "-" if reference is None else f"{reference:.3f}"
            section.line(
                f"{count:>6} {times[FLOOR]:>9.3f} {shown:>9} {times[OURS]:>9.3f}"
                f" {ratio(times[OURS], reference):>8} {ratio(times[OURS], times[FLOOR]):>11}"
            )
        list_medians = measure_list(list_sizes, repeat, Path(tmp))
    result = ReferenceResult(medians, list_medians, checkout is not None)
    print_per_block(result, section)
    print_list(result, section)
    summarize(result, section)
    return result


def ratio(ours: float, other: float | None) -> str:
    return "-" if other is None else f"{ours / other:.2f}x"


def print_per_block(result: ReferenceResult, section: Section) -> None:
    if len(result.medians) < 2:
        return
    section.line("")
    section.line("per block, ms: (t(N2) - t(N1)) / (N2 - N1); start-up: t(N1) - N1 x that (interpreter included)")
    names = [name for name in (FLOOR, REFERENCE, OURS) if name in result.medians[min(result.medians)]]
    section.table(f"{'N1->N2':>11}" + "".join(f" {name + ' ms':>9}" for name in names) + f" {'ours-floor':>11}")
    for index, (first, second, _) in enumerate(per_block_ms(result.medians, FLOOR)):
        costs = {name: per_block_ms(result.medians, name)[index][2] for name in names}
        cells = "".join(f" {costs[name]:>9.2f}" for name in names)
        section.line(f"{f'{first}->{second}':>11}{cells} {costs[OURS] - costs[FLOOR]:>11.2f}")
    first = min(result.medians)
    starts = "; ".join(f"{name} {startup_s(result, name) * 1000:.0f} ms" for name in names)
    section.line(f"start-up at N={first}: {starts}")


def startup_s(result: ReferenceResult, name: str) -> float:
    first, _, ms = per_block_ms(result.medians, name)[0]
    return result.medians[first][name] - first * ms / 1000


def print_list(result: ReferenceResult, section: Section) -> None:
    section.line("")
    section.line("python -m ci.run --list GUIDE (read, check and plan the guide; nothing runs)")
    section.table(f"{'blocks':>8} {'wall s':>9} {'x smallest':>11}")
    smallest = result.list_medians[min(result.list_medians)]
    for count, seconds in sorted(result.list_medians.items()):
        section.line(f"{count:>8} {seconds:>9.3f} {seconds / smallest:>10.2f}x")


def summarize(result: ReferenceResult, section: Section) -> None:
    for count, times in result.medians.items():
        if REFERENCE in times:
            mine = times[OURS] / times[REFERENCE]
            section.summary.append(
                SummaryRow(
                    "reference",
                    f"{count} trivial blocks vs the reference engine",
                    f"{times[OURS]:.3f} s",
                    f"R {times[REFERENCE]:.3f} s",
                    f"{mine:.2f}x",
                    "< 1x",
                    verdict(mine < 1),
                )
            )
    if len(result.medians) >= 2:
        first, second, ours_ms = per_block_ms(result.medians, OURS)[-1]
        floor_ms = per_block_ms(result.medians, FLOOR)[-1][2]
        section.summary.append(
            SummaryRow(
                "reference",
                f"per-block cost, {first}->{second} blocks",
                f"{ours_ms:.2f} ms",
                f"floor {floor_ms:.2f} ms",
                f"+{ours_ms - floor_ms:.2f} ms",
                f"<= +{TARGET_OVERHEAD_MS} ms",
                verdict(ours_ms - floor_ms <= TARGET_OVERHEAD_MS),
            )
        )
        if result.reference_ran:
            section.summary.append(
                SummaryRow(
                    "reference",
                    f"start-up (t({first}) less {first} blocks)",
                    f"{startup_s(result, OURS) * 1000:.0f} ms",
                    f"R {startup_s(result, REFERENCE) * 1000:.0f} ms",
                    f"{startup_s(result, OURS) / startup_s(result, REFERENCE):.2f}x",
                    "< 1x",
                    verdict(startup_s(result, OURS) < startup_s(result, REFERENCE)),
                )
            )
    if len(result.list_medians) >= 2:
        smallest, largest = min(result.list_medians), max(result.list_medians)
        growth = result.list_medians[largest] / result.list_medians[smallest]
        section.summary.append(
            SummaryRow(
                "reference",
                f"--list of {largest} blocks vs {smallest}",
                f"{result.list_medians[largest]:.2f} s",
                f"{smallest} blocks {result.list_medians[smallest]:.2f} s",
                f"{growth:.2f}x",
                f"<= {TARGET_LIST_GROWTH:.0f}x",
                verdict(growth <= TARGET_LIST_GROWTH),
            )
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reference", type=Path, help="a checkout of cosdt-ci-test/workflows (else R is skipped)")
    parser.add_argument("--sizes", type=int_list, default=[20, 200, 1000], help="block counts (default 20,200,1000)")
    parser.add_argument(
        "--list-sizes", type=int_list, default=[5000, 20000], help="guide sizes for --list (default 5000,20000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the median is kept (default 5)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    section = Section("Reference")
    try:
        run_reference(args.sizes, args.list_sizes, args.repeat, args.reference, section)
    except (CommandFailed, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    print()
    for row in section.summary:
        print(f"{row.measure}: {row.ours} against {row.reference}: {row.ratio} ({row.target}: {row.verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
