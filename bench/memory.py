"""Peak memory of `python -m ci.run` on a block printing 1 GiB, against the subprocess+regex baseline.

The guide has one `#test` block printing `--mib` MiB of log lines and then a
line `DONE`; its expected output `...DONE...` makes the matcher search the
whole output for that line. The harness sends the block's stdout to a file and
matches it in bounded chunks; the baseline (bench/overhead.py's reference
engine: `subprocess.run(..., capture_output=True)` plus a `.*?` regex) holds
the output in memory, as bytes and again as text. Its size is capped at
`--baseline-mib` (default 1024: about 3 GiB of peak memory, safe on this 24 GiB
machine); when smaller than `--mib`, the table says so.

The harness runs three more such guides: the last line is `DONE` and an
invalid byte, expected as `...DONE \ufffd...` (a U+FFFD in the body matches a
replaced byte, and must not make the harness decode the whole output in
memory); and two mismatches, `...DONE\nMISSING` and the same with U+FFFD, whose
first unmatched line is looked for in the whole output.

Peak RSS is measured the same way for both: a small launcher forks and its
child execs the command, and wait4() gives the largest RSS of any process of
the tree (Linux carries the peak across exec, so launching from a big parent
would report the parent). results.json's `harness_peak_rss_bytes` is shown as
well. The floor of the method is the launcher's fork, about 10 MiB.

    python bench/memory.py [--mib 1024] [--baseline-mib 1024]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import MIB, REPO, CommandFailed, Section, SummaryRow, mib_text, run_peak_memory, verdict
from overhead import BASELINE_SCRIPT

TARGET_BYTES = 100 * MIB
LOG_LINE = "memory benchmark: one line of a large training log, loss 0.125 lr 0.0001"  # no "DONE" in it
EXPECTED = "...DONE..."


@dataclass(frozen=True)
class Case:
    """One guide the harness runs: what its block prints last, what is expected, and the verdict."""

    name: str  # as the table shows it
    last_line: str  # printf format of the block's last line
    expected: str
    status: str  # the block's status in results.json


CASES = (
    Case("ci.run", "DONE\\n", EXPECTED, "passed"),
    Case("U+FFFD", "DONE \\377\\n", "...DONE \ufffd...", "passed"),
    Case("mismatch", "DONE\\n", "...DONE\nMISSING", "mismatch"),
    Case("U+FFFD mismatch", "DONE \\377\\n", "...DONE \ufffd\nMISSING", "mismatch"),
)


def block_command(size_bytes: int, last_line: str = "DONE\\n") -> str:
    return f"yes '{LOG_LINE}' | head -c {size_bytes}; echo; printf '{last_line}'"


def write_guide(path: Path, size_bytes: int, case: Case) -> None:
    path.write_text(
        "# Memory benchmark\n\n"
        f'```shell #test id="big"\n{block_command(size_bytes, case.last_line)}\n```\n\n'
        f'```shell #test-result id="big"\n{case.expected}\n```\n',
        encoding="utf-8",
    )


@dataclass(frozen=True)
class HarnessResult:
    """Peak RSS and wall time of the harness on one case."""

    case: Case
    output_bytes: int  # what the block printed
    peak_bytes: int  # measured by the launcher
    record_bytes: int  # results.json harness_peak_rss_bytes
    wall_s: float


@dataclass(frozen=True)
class MemoryResult:
    """Peak RSS and wall time of the harness on each case and of the baseline."""

    harness: tuple[HarnessResult, ...]  # in the order of CASES
    baseline_output_bytes: int
    baseline_peak_bytes: int
    baseline_wall_s: float


def measure_harness(size: int, case: Case, work: Path) -> HarnessResult:
    guide = work / "guide.md"
    write_guide(guide, size, case)
    out = work / "ci-out"
    log = work / "ci.log"
    ours = run_peak_memory([sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out)], cwd=REPO, log=log)
    if ours.exit_code != (0 if case.status == "passed" else 1):
        raise CommandFailed(f"ci.run exited {ours.exit_code}:\n{log.read_text(errors='replace')[-2000:]}")
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    block = record["blocks"][0]
    if block["status"] != case.status:
        raise CommandFailed(f"{case.name}: the block is {block['status']}, not {case.status}: {block['message']}")
    for stream in ("stdout_path", "stderr_path"):
        if block[stream]:
            (out / block[stream]).unlink()  # a GiB on disk is not worth keeping
    return HarnessResult(
        case, int(block["stdout_bytes"]), ours.max_rss_bytes, int(record["harness_peak_rss_bytes"]), ours.wall_s
    )


def measure(mib: int, baseline_mib: int, work: Path) -> MemoryResult:
    size = mib * MIB
    harness = tuple(measure_harness(size, case, work) for case in CASES)
    baseline_size = min(size, baseline_mib * MIB)
    pairs = work / "blocks.json"
    pairs.write_text(json.dumps([[block_command(baseline_size), EXPECTED]]), encoding="utf-8")
    baseline = run_peak_memory([sys.executable, "-c", BASELINE_SCRIPT, str(pairs)], cwd=work, log=work / "baseline.log")
    if baseline.exit_code != 0:
        raise CommandFailed(f"the baseline exited {baseline.exit_code} (its block failed or did not match)")
    return MemoryResult(
        harness=harness,
        baseline_output_bytes=baseline_size,
        baseline_peak_bytes=baseline.max_rss_bytes,
        baseline_wall_s=baseline.wall_s,
    )


def run_memory(mib: int, baseline_mib: int, section: Section) -> MemoryResult:
    with tempfile.TemporaryDirectory(prefix="gg-memory-") as tmp:
        result = measure(mib, baseline_mib, Path(tmp))
    plain = result.harness[0]
    section.line(f"one block printing {mib_text(plain.output_bytes)}, matched against {EXPECTED!r} (a full scan)")
    section.table(f"{'engine':>16} {'output':>10} {'peak RSS':>10} {'wall s':>8}  note")
    for row in result.harness:
        section.line(
            f"{row.case.name:>16} {mib_text(row.output_bytes):>10} {mib_text(row.peak_bytes):>10}"
            f" {row.wall_s:>8.2f}  expected {row.case.expected!a}, {row.case.status};"
            f" results.json harness_peak_rss_bytes: {mib_text(row.record_bytes)}"
        )
    capped = " (capped by --baseline-mib)" if result.baseline_output_bytes < plain.output_bytes - MIB else ""
    section.line(
        f"{'baseline':>16} {mib_text(result.baseline_output_bytes):>10} {mib_text(result.baseline_peak_bytes):>10}"
        f" {result.baseline_wall_s:>8.2f}  capture_output + decode + regex{capped}"
    )
    section.summary.append(
        SummaryRow(
            "memory",
            f"peak RSS, one block printing {mib_text(plain.output_bytes)}",
            mib_text(plain.peak_bytes),
            f"baseline {mib_text(result.baseline_peak_bytes)} ({mib_text(result.baseline_output_bytes)} output)",
            f"{plain.peak_bytes / result.baseline_peak_bytes:.3f}x",
            "< 100 MiB",
            verdict(plain.peak_bytes < TARGET_BYTES),
        )
    )
    worst = max(result.harness[1:], key=lambda row: row.peak_bytes)
    section.summary.append(
        SummaryRow(
            "memory",
            "peak RSS, U+FFFD in the body or a mismatch (worst)",
            mib_text(worst.peak_bytes),
            worst.case.name,
            "",
            "< 100 MiB",
            verdict(worst.peak_bytes < TARGET_BYTES),
        )
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="MiB the block prints (default 1024)")
    parser.add_argument(
        "--baseline-mib", type=int, default=1024, help="at most this many MiB for the baseline (default 1024)"
    )
    args = parser.parse_args(argv)
    if args.mib < 1 or args.baseline_mib < 1:
        parser.error("--mib and --baseline-mib must be at least 1")
    try:
        run_memory(args.mib, args.baseline_mib, Section("Memory"))
    except (CommandFailed, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
