"""Match throughput of `ci.expect.match.match_file` and the adversarial family, side by side with a `.*?` regex.

Throughput: for each output size (MB = 2^20 bytes) a log of numbered lines is
written to a temporary file; bodies with 1, 10 or 1000 wildcards pin its first
line, lines spread evenly through it, and its last line. `hit` is a matching
body (every piece is searched for, the last near the end); `miss` has its first
middle line (or, with one wildcard, its last line) nowhere in the output, so
the whole output is scanned in vain. MB/s is the output's size over the best of
`--repeat` times (warm page cache); with one wildcard ours scans nothing, it
reads both ends. The regex (the reference engine's way: the body's pieces
escaped and joined by a lazy DOTALL `.*?`, then `\\n*`) runs once per case in a
child process that has already read and decoded the output, cut off after
`--throughput-regex-timeout` seconds.

Adversarial: body `...a...a...b` (`--adversarial-repeats` times `a...`) against
`a` * n (a file, matched by `match_file` as the harness does). A lazy-regex matcher backtracks through every way of splitting the
`a`s (about n^(repeats+1) steps); ours answers in one pass: for this body by
the last piece alone (`b` is not a suffix), so each body is also run in its
scanning form `...a...a...b...`, where `b` must be searched for through the
whole output. The regex runs in a
child process cut off after `--regex-timeout` seconds (shown as `>T`); once
cut off, larger n are not tried for that body (`-`).

The growth exponent is log(t2/t1)/log(n2/n1) between the two largest sizes:
about 1 is linear, 2 quadratic.

    python bench/matching.py [--sizes 1,10,100] [--wildcards 1,10,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import CommandFailed, Section, SummaryRow, int_list, probe_seconds, verdict

from ci.expect.match import match_file, matches

MB = 1024 * 1024
LINE_BYTES = 64
TARGET_MB_S = 100.0
LINEAR_EXPONENT = 1.3  # a measured exponent up to this is taken as linear (timer noise)
MIN_EXPONENT_S = 1e-4  # times below this are too short to fit an exponent to
CONSTANT_CEILING_S = 1e-3  # a match this fast at the largest n did not depend on n

# Reads its inputs first, says "ready", and only then times the match.
REGEX_PROBE = r"""
import re, sys, time
pattern = open(sys.argv[1], encoding="utf-8").read()
source = sys.argv[2]
actual = "a" * int(source[1:]) if source.startswith("=") else open(source, "rb").read().decode("utf-8", "replace")
compiled = re.compile(pattern + r"\n*", re.DOTALL)
print("ready", flush=True)
started = time.perf_counter()
matched = compiled.fullmatch(actual) is not None
print(time.perf_counter() - started, matched, flush=True)
"""


def log_line(index: int) -> str:
    """Line `index` of a generated output, without its newline (LINE_BYTES - 1 characters)."""
    return f"step {index:09d} loss {index % 997:04d} lr 0.0001 tokens/s {index % 4099:05d}".ljust(LINE_BYTES - 1, "-")


def write_output(path: Path, size_mb: int) -> int:
    """Write about `size_mb` MB of log lines in chunks; return the line count."""
    lines = max(2, size_mb * MB // LINE_BYTES)
    chunk_lines = 16_384
    with open(path, "wb") as handle:
        for first in range(0, lines, chunk_lines):
            last = min(first + chunk_lines, lines)
            handle.write("".join(log_line(index) + "\n" for index in range(first, last)).encode("ascii"))
    return lines


def wildcard_body(lines: int, wildcards: int, *, missing: bool = False) -> str:
    """First line, `wildcards - 1` distinct lines spread evenly, last line, joined by wildcards."""
    if wildcards + 1 > lines:
        raise RuntimeError(f"{wildcards} wildcards need more than {lines} lines of output: use a larger size")
    middle = [1 + (lines - 2) * k // (wildcards - 1) for k in range(wildcards - 1)] if wildcards > 1 else []
    texts = [log_line(0)] + [log_line(index) for index in middle] + [log_line(lines - 1)]
    if missing:
        texts[1 if len(texts) > 2 else -1] = "step 999999999 is nowhere"
    return "...".join(texts)


def best_time(repeat: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9)


def regex_pattern(body: str) -> str:
    """The reference: literals escaped, each `...` a lazy DOTALL `.*?`."""
    return "".join(".*?" if index % 2 else re.escape(part) for index, part in enumerate(re.split(r"(\.\.\.)", body)))


def regex_seconds(body: str, source: str, timeout_s: float, work: Path) -> tuple[float, bool] | None:
    """(seconds, matched) of the regex in a child process; None when cut off at the timeout.

    `source` is a file path, or `=N` for `a` * N.
    """
    pattern_file = work / "pattern.txt"
    pattern_file.write_text(regex_pattern(body), encoding="utf-8")
    return probe_seconds(REGEX_PROBE, [str(pattern_file), source], timeout_s)


def growth_exponent(points: list[tuple[float, float]]) -> float | None:
    """log(t2/t1)/log(n2/n1) between the two largest sizes whose times are long enough to measure."""
    usable = sorted((n, t) for n, t in points if t >= MIN_EXPONENT_S)
    if len(usable) < 2 or usable[-1][0] <= usable[-2][0]:
        return None
    (n1, t1), (n2, t2) = usable[-2], usable[-1]
    return math.log(t2 / t1) / math.log(n2 / n1)


def exponent_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class ThroughputRow:
    """One output size and wildcard count: best times of ours, one time of the regex (None: cut off)."""

    size_mb: float  # actual size of the output, in MB
    wildcards: int
    hit_s: float
    miss_s: float
    regex_hit_s: float | None
    regex_miss_s: float | None


@dataclass(frozen=True)
class AdversarialRow:
    """One body of the family against `a` * n."""

    body: str
    repeats: int  # `a...` repetitions in the body
    n: int
    ours_s: float
    regex_s: float | None  # None: cut off, or not tried
    regex_cut_off: bool  # True where the regex hit the timeout (regex_s is then None)


def seconds_cell(value: float | None, timeout_s: float, cut_off: bool = True) -> str:
    if value is not None:
        return f"{value:.4f}"
    return f">{timeout_s:g}" if cut_off else "-"


def run_throughput(
    sizes_mb: list[int], wildcard_counts: list[int], repeat: int, regex_timeout_s: float, section: Section
) -> list[ThroughputRow]:
    section.line(f"match_file throughput (best of {repeat}); regex: one run, cut off after {regex_timeout_s:g} s")
    section.table(
        f"{'size MB':>8} {'wildcards':>10} {'hit s':>9} {'hit MB/s':>10} {'miss s':>9} {'miss MB/s':>10}"
        f" {'regex hit s':>12} {'regex miss s':>13} {'regex/ours':>11}"
    )
    rows: list[ThroughputRow] = []
    with tempfile.TemporaryDirectory(prefix="gg-matching-") as tmp:
        work = Path(tmp)
        for size_mb in sizes_mb:
            path = work / f"out-{size_mb}.txt"
            lines = write_output(path, size_mb)
            actual_mb = path.stat().st_size / MB
            for wildcards in wildcard_counts:
                hit = wildcard_body(lines, wildcards)
                miss = wildcard_body(lines, wildcards, missing=True)
                if match_file(str(path), hit, ("...",)) is not None:
                    raise CommandFailed(f"{size_mb} MB, {wildcards} wildcards: the matching body did not match")
                if match_file(str(path), miss, ("...",)) is None:
                    raise CommandFailed(f"{size_mb} MB, {wildcards} wildcards: the missing line was found")
                hit_s = best_time(repeat, functools.partial(match_file, str(path), hit, ("...",)))
                miss_s = best_time(repeat, functools.partial(match_file, str(path), miss, ("...",)))
                regex_hit = regex_seconds(hit, str(path), regex_timeout_s, work)
                regex_miss = regex_seconds(miss, str(path), regex_timeout_s, work)
                if (regex_hit is not None and not regex_hit[1]) or (regex_miss is not None and regex_miss[1]):
                    raise CommandFailed(f"{size_mb} MB, {wildcards} wildcards: the regex gave another verdict")
                row = ThroughputRow(
                    actual_mb,
                    wildcards,
                    hit_s,
                    miss_s,
                    regex_hit[0] if regex_hit else None,
                    regex_miss[0] if regex_miss else None,
                )
                rows.append(row)
                regex_total = (row.regex_hit_s or regex_timeout_s) + (row.regex_miss_s or regex_timeout_s)
                bound = ">" if row.regex_hit_s is None or row.regex_miss_s is None else ""
                section.line(
                    f"{size_mb:>8} {wildcards:>10} {hit_s:>9.4f} {actual_mb / hit_s:>10.0f}"
                    f" {miss_s:>9.4f} {actual_mb / miss_s:>10.0f}"
                    f" {seconds_cell(row.regex_hit_s, regex_timeout_s):>12}"
                    f" {seconds_cell(row.regex_miss_s, regex_timeout_s):>13}"
                    f" {bound + f'{regex_total / (hit_s + miss_s):.0f}x':>11}"
                )
            path.unlink()
    return rows


def adversarial_body(repeats: int, *, scan: bool = False) -> str:
    """`...a...a...b`; with `scan`, a trailing `...` too, so that `b` must be searched for in the whole output."""
    return "..." + "a..." * repeats + "b" + ("..." if scan else "")


def adversarial_bodies(repeats_list: list[int]) -> list[tuple[int, str]]:
    """(repeats, body) for each repetition count: the issue's body, then its scanning form."""
    return [(repeats, adversarial_body(repeats, scan=scan)) for repeats in repeats_list for scan in (False, True)]


def run_adversarial(
    ns: list[int], repeats_list: list[int], timeout_s: float, repeat: int, section: Section
) -> list[AdversarialRow]:
    section.line("")
    section.line(
        f"adversarial family: body against 'a' * n (regex cut off after {timeout_s:g} s; not tried past a cut-off)"
    )
    section.table(f"{'body':>22} {'n':>10} {'regex s':>9} {'ours s':>10} {'ratio':>10}")
    rows: list[AdversarialRow] = []
    with tempfile.TemporaryDirectory(prefix="gg-adversarial-") as tmp:
        for repeats, body in adversarial_bodies(repeats_list):
            shown = body if len(body) <= 22 else body[:19] + "..."
            cut_off_at: int | None = None
            for n in sorted(ns):
                output = Path(tmp) / "output.txt"
                output.write_bytes(b"a" * n)
                if match_file(str(output), body, ("...",)) is None:
                    raise CommandFailed(f"{body!r} matched 'a' * {n}")
                if n <= 1_000_000 and matches("a" * n + "b", body) != (n >= repeats):
                    raise CommandFailed(f"wrong verdict for {body!r} against 'a' * {n} + 'b'")
                ours_s = best_time(repeat, functools.partial(match_file, str(output), body, ("...",)))
                regex: tuple[float, bool] | None = None
                if cut_off_at is None:
                    regex = regex_seconds(body, f"={n}", timeout_s, Path(tmp))
                    if regex is None:
                        cut_off_at = n
                    elif regex[1]:
                        raise CommandFailed(f"the regex matched {body!r} against 'a' * {n}")
                row = AdversarialRow(body, repeats, n, ours_s, regex[0] if regex else None, cut_off_at == n)
                rows.append(row)
                if row.regex_s is not None:
                    ratio_text = f"{row.regex_s / ours_s:.0f}x"
                elif row.regex_cut_off:
                    ratio_text = f">{timeout_s / ours_s:.0f}x"
                else:
                    ratio_text = "-"
                section.line(
                    f"{shown:>22} {n:>10} {seconds_cell(row.regex_s, timeout_s, row.regex_cut_off):>9}"
                    f" {ours_s:>10.6f} {ratio_text:>10}"
                )
    section.line("")
    section.line("growth exponent between the two largest measurable n (1 = linear)")
    section.table(f"{'body':>22} {'ours':>8} {'regex':>8}")
    for _, body in adversarial_bodies(repeats_list):
        mine = [row for row in rows if row.body == body]
        ours_exponent = growth_exponent([(row.n, row.ours_s) for row in mine])
        regex_exponent = growth_exponent([(row.n, row.regex_s) for row in mine if row.regex_s is not None])
        section.line(f"{body:>22} {exponent_text(ours_exponent):>8} {exponent_text(regex_exponent):>8}")
    return rows


def summarize(throughput: list[ThroughputRow], adversarial: list[AdversarialRow], section: Section) -> None:
    """Add the matching rows of the summary table."""
    if throughput:
        summarize_throughput(throughput, section)
    summarize_adversarial(adversarial, section)


def slowest_rates(rows: list[ThroughputRow]) -> tuple[float, float | None]:
    """(ours, regex) slowest MB/s over hit and miss of these rows; regex None when it was always cut off."""
    ours = min(row.size_mb / seconds for row in rows for seconds in (row.hit_s, row.miss_s))
    regex = [row.size_mb / seconds for row in rows for seconds in (row.regex_hit_s, row.regex_miss_s) if seconds]
    return ours, min(regex) if regex else None


def summarize_throughput(throughput: list[ThroughputRow], section: Section) -> None:
    largest_mb = max(row.size_mb for row in throughput)
    cases = [(f"slowest throughput at {largest_mb:.0f} MB", [row for row in throughput if row.size_mb == largest_mb])]
    if len({row.size_mb for row in throughput}) > 1:
        cases.append(("slowest throughput at any size (small outputs: fixed costs)", throughput))
    for index, (label, chosen) in enumerate(cases):
        ours_rate, regex_rate = slowest_rates(chosen)
        target = index == 0  # the target is about large outputs
        section.summary.append(
            SummaryRow(
                "matching",
                label,
                f"{ours_rate:,.0f} MB/s",
                f"regex {regex_rate:,.0f} MB/s" if regex_rate is not None else "regex cut off",
                "",
                f">= {TARGET_MB_S:.0f} MB/s" if target else "",
                verdict(ours_rate >= TARGET_MB_S) if target else "",
            )
        )
    exponents = []
    for wildcards in sorted({row.wildcards for row in throughput}):
        same = [row for row in throughput if row.wildcards == wildcards]
        for points in ([(row.size_mb, row.hit_s) for row in same], [(row.size_mb, row.miss_s) for row in same]):
            exponent = growth_exponent(points)
            if exponent is not None:
                exponents.append(exponent)
    if exponents:
        section.summary.append(
            SummaryRow(
                "matching",
                "growth with output size (worst case)",
                f"exponent {max(exponents):.2f}",
                "",
                "",
                f"linear (<= {LINEAR_EXPONENT})",
                verdict(max(exponents) <= LINEAR_EXPONENT),
            )
        )


def summarize_adversarial(adversarial: list[AdversarialRow], section: Section) -> None:
    bodies = list(dict.fromkeys(row.body for row in adversarial))
    for body in bodies:
        mine = [row for row in adversarial if row.body == body]
        ours_exponent = growth_exponent([(row.n, row.ours_s) for row in mine])
        regex_exponent = growth_exponent([(row.n, row.regex_s) for row in mine if row.regex_s is not None])
        largest = max(mine, key=lambda row: row.n)
        cut = next((row for row in mine if row.regex_cut_off), None)
        reference = f"regex exponent {exponent_text(regex_exponent)}"
        if cut is not None:
            reference += f", cut off at n={cut.n:,}"
        if ours_exponent is not None:
            growth, linear = f"exponent {ours_exponent:.2f}", ours_exponent <= LINEAR_EXPONENT
        else:  # too short at every n to fit a growth: it never scanned the output
            # under a millisecond at n = 10^8 cannot be superlinear (a scan alone takes far longer)
            growth, linear = "constant", max(row.ours_s for row in mine) < CONSTANT_CEILING_S
        section.summary.append(
            SummaryRow(
                "matching",
                f"adversarial {body}, n up to {largest.n:,}",
                f"{largest.ours_s * 1000:.2f} ms, {growth}",
                reference,
                "",
                "linear",
                verdict(linear),
            )
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int_list, default=[1, 10], help="output sizes in MB (default 1,10)")
    parser.add_argument(
        "--wildcards", type=int_list, default=[1, 10, 1000], help="wildcards per body (default 1,10,1000)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, the best is kept (default 3)")
    parser.add_argument(
        "--throughput-regex-timeout",
        type=float,
        default=60.0,
        help="seconds before a throughput regex is cut off (default 60)",
    )
    parser.add_argument(
        "--adversarial-n",
        type=int_list,
        default=[1000, 2000, 2_000_000],
        help="output lengths (default 1000,2000,2000000)",
    )
    parser.add_argument(
        "--adversarial-repeats", type=int_list, default=[1, 2, 3], help="`a...` repetitions in the body (default 1,2,3)"
    )
    parser.add_argument(
        "--regex-timeout", type=float, default=2.0, help="seconds before an adversarial regex is cut off (default 2)"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    section = Section("Matching")
    try:
        throughput = run_throughput(args.sizes, args.wildcards, args.repeat, args.throughput_regex_timeout, section)
        adversarial = run_adversarial(
            args.adversarial_n, args.adversarial_repeats, args.regex_timeout, args.repeat, section
        )
    except (CommandFailed, RuntimeError, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    summarize(throughput, adversarial, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
