"""Peak memory of `python -m ci.run` on a block printing 1 GiB, against the subprocess+regex baseline.

The guide has one `#test` block printing `--mib` MiB of log lines and then a
line `DONE`; its expected output `...DONE...` makes the matcher search the
whole output for that line. The harness sends the block's stdout to a file and
matches it in bounded chunks; the baseline (bench/overhead.py's reference
engine: `subprocess.run(..., capture_output=True)` plus a `.*?` regex) holds
the output in memory, as bytes and again as text. Its size is capped at
`--baseline-mib` (default 1024: about 3 GiB of peak memory, safe on this 24 GiB
machine); when smaller than `--mib`, the table says so.

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


def block_command(size_bytes: int) -> str:
    return f"yes '{LOG_LINE}' | head -c {size_bytes}; echo; echo DONE"


def write_guide(path: Path, size_bytes: int) -> None:
    path.write_text(
        "# Memory benchmark\n\n"
        f'```shell #test id="big"\n{block_command(size_bytes)}\n```\n\n'
        f'```shell #test-result id="big"\n{EXPECTED}\n```\n',
        encoding="utf-8",
    )


@dataclass(frozen=True)
class MemoryResult:
    """Peak RSS and wall time of the harness and of the baseline."""

    output_bytes: int  # what the block printed for the harness
    harness_peak_bytes: int  # measured by the launcher
    harness_record_bytes: int  # results.json harness_peak_rss_bytes
    harness_wall_s: float
    baseline_output_bytes: int
    baseline_peak_bytes: int
    baseline_wall_s: float


def measure(mib: int, baseline_mib: int, work: Path) -> MemoryResult:
    size = mib * MIB
    guide = work / "guide.md"
    write_guide(guide, size)
    out = work / "ci-out"
    log = work / "ci.log"
    ours = run_peak_memory([sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out)], cwd=REPO, log=log)
    if ours.exit_code != 0:
        raise CommandFailed(f"ci.run exited {ours.exit_code}:\n{log.read_text(errors='replace')[-2000:]}")
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    block = record["blocks"][0]
    if block["status"] != "passed":
        raise CommandFailed(f"the block did not pass: {block['status']}: {block['message']}")
    for stream in ("stdout_path", "stderr_path"):
        if block[stream]:
            (out / block[stream]).unlink()  # a GiB on disk is not worth keeping
    baseline_size = min(size, baseline_mib * MIB)
    pairs = work / "blocks.json"
    pairs.write_text(json.dumps([[block_command(baseline_size), EXPECTED]]), encoding="utf-8")
    baseline = run_peak_memory([sys.executable, "-c", BASELINE_SCRIPT, str(pairs)], cwd=work, log=work / "baseline.log")
    if baseline.exit_code != 0:
        raise CommandFailed(f"the baseline exited {baseline.exit_code} (its block failed or did not match)")
    return MemoryResult(
        output_bytes=int(block["stdout_bytes"]),
        harness_peak_bytes=ours.max_rss_bytes,
        harness_record_bytes=int(record["harness_peak_rss_bytes"]),
        harness_wall_s=ours.wall_s,
        baseline_output_bytes=baseline_size,
        baseline_peak_bytes=baseline.max_rss_bytes,
        baseline_wall_s=baseline.wall_s,
    )


def run_memory(mib: int, baseline_mib: int, section: Section) -> MemoryResult:
    with tempfile.TemporaryDirectory(prefix="gg-memory-") as tmp:
        result = measure(mib, baseline_mib, Path(tmp))
    section.line(f"one block printing {mib_text(result.output_bytes)}, matched against {EXPECTED!r} (a full scan)")
    section.table(f"{'engine':>10} {'output':>10} {'peak RSS':>10} {'wall s':>8}  note")
    section.line(
        f"{'ci.run':>10} {mib_text(result.output_bytes):>10} {mib_text(result.harness_peak_bytes):>10}"
        f" {result.harness_wall_s:>8.2f}  results.json harness_peak_rss_bytes: {mib_text(result.harness_record_bytes)}"
    )
    capped = " (capped by --baseline-mib)" if result.baseline_output_bytes < result.output_bytes - MIB else ""
    section.line(
        f"{'baseline':>10} {mib_text(result.baseline_output_bytes):>10} {mib_text(result.baseline_peak_bytes):>10}"
        f" {result.baseline_wall_s:>8.2f}  capture_output + decode + regex{capped}"
    )
    section.summary.append(
        SummaryRow(
            "memory",
            f"peak RSS, one block printing {mib_text(result.output_bytes)}",
            mib_text(result.harness_peak_bytes),
            f"baseline {mib_text(result.baseline_peak_bytes)} ({mib_text(result.baseline_output_bytes)} output)",
            f"{result.harness_peak_bytes / result.baseline_peak_bytes:.3f}x",
            "< 100 MiB",
            verdict(result.harness_peak_bytes < TARGET_BYTES),
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
