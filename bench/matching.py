"""Match throughput of `ci.check.match_file`, and the adversarial family against a `.*?` regex.

Throughput: for each output size (MB) a log of numbered lines is written to a
temporary file; bodies with 1, 10 or 1000 wildcards pin its first line, lines
spread evenly through it, and its last line. `hit` is a matching body (every
piece is searched for, the last near the end); `miss` has its first middle line
(or, with one wildcard, its last line) nowhere in the output, so the whole output
is scanned in vain. MB/s is the output's size over the best of `--repeat` times
(warm page cache); with one wildcard nothing is scanned, only both ends read.

Adversarial: body `...a...a...a...b` (`--adversarial-repeats` times `a...`) against
`a` * n. A lazy-regex matcher backtracks through every way of splitting the `a`s;
ours answers in one pass. The regex runs in a child process cut off after
`--regex-timeout` seconds (shown as `>T`).

    python bench/matching.py [--sizes 1,10,100] [--wildcards 1,10,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ci.check import match_file, matches

MB = 1024 * 1024
LINE_BYTES = 64

REGEX_PROBE = """
import re, sys, time
compiled = re.compile(sys.argv[1] + r"\\n*", re.DOTALL)
actual = "a" * int(sys.argv[2])
print("ready", flush=True)
started = time.perf_counter()
compiled.fullmatch(actual)
print(time.perf_counter() - started, flush=True)
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


def throughput(sizes_mb: list[int], wildcard_counts: list[int], repeat: int) -> None:
    header = f"{'size MB':>8} {'wildcards':>10} {'hit s':>9} {'hit MB/s':>10} {'miss s':>9} {'miss MB/s':>10}"
    print(f"match_file throughput (best of {repeat})")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="gg-matching-") as tmp:
        for size_mb in sizes_mb:
            path = Path(tmp) / f"out-{size_mb}.txt"
            lines = write_output(path, size_mb)
            actual_mb = path.stat().st_size / MB
            for wildcards in wildcard_counts:
                hit = wildcard_body(lines, wildcards)
                miss = wildcard_body(lines, wildcards, missing=True)
                if match_file(str(path), hit, ("...",)) is not None:
                    raise RuntimeError(f"{size_mb} MB, {wildcards} wildcards: the matching body did not match")
                if match_file(str(path), miss, ("...",)) is None:
                    raise RuntimeError(f"{size_mb} MB, {wildcards} wildcards: the missing line was found")
                hit_s = best_time(repeat, functools.partial(match_file, str(path), hit, ("...",)))
                miss_s = best_time(repeat, functools.partial(match_file, str(path), miss, ("...",)))
                print(
                    f"{size_mb:>8} {wildcards:>10} {hit_s:>9.4f} {actual_mb / hit_s:>10.0f}"
                    f" {miss_s:>9.4f} {actual_mb / miss_s:>10.0f}",
                    flush=True,
                )
            path.unlink()


def adversarial_body(repeats: int) -> str:
    return "..." + "a..." * repeats + "b"


def regex_pattern(body: str) -> str:
    """The reference: literals escaped, each `...` a lazy DOTALL `.*?`."""
    return "".join(".*?" if index % 2 else re.escape(part) for index, part in enumerate(re.split(r"(\.\.\.)", body)))


def regex_seconds(body: str, n: int, timeout_s: float) -> float | None:
    """The regex's time on `a` * n in a child process; None when cut off at the timeout."""
    child = subprocess.Popen(
        [sys.executable, "-c", REGEX_PROBE, regex_pattern(body), str(n)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the regex probe did not start")
        try:
            # not communicate(): with a timeout it reads the raw pipe, skipping what readline() buffered
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return float(child.stdout.read().strip())
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def adversarial(ns: list[int], repeats_list: list[int], timeout_s: float, repeat: int) -> None:
    header = f"{'body':>22} {'n':>10} {'regex s':>9} {'ours s':>10} {'ratio':>10}"
    print(f"\nadversarial family: body against 'a' * n (regex cut off after {timeout_s:g} s)")
    print(header)
    print("-" * len(header))
    for repeats in repeats_list:
        body = adversarial_body(repeats)
        shown = body if len(body) <= 22 else body[:19] + "..."
        for n in ns:
            actual = "a" * n
            if matches(actual, body) or not matches(actual + "b", body) == (n >= repeats):
                raise RuntimeError(f"wrong verdict for {body!r} at n={n}")
            ours_s = best_time(repeat, functools.partial(matches, actual, body))
            regex_s = regex_seconds(body, n, timeout_s)
            regex_text = f">{timeout_s:g}" if regex_s is None else f"{regex_s:.4f}"
            ratio = (timeout_s if regex_s is None else regex_s) / ours_s
            ratio_text = (">" if regex_s is None else "") + f"{ratio:.0f}x"
            print(f"{shown:>22} {n:>10} {regex_text:>9} {ours_s:>10.6f} {ratio_text:>10}", flush=True)


def int_list(text: str) -> list[int]:
    values = [int(item) for item in text.split(",") if item.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive integers, e.g. 1,10")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int_list, default=[1, 10], help="output sizes in MB (default 1,10)")
    parser.add_argument(
        "--wildcards", type=int_list, default=[1, 10, 1000], help="wildcards per body (default 1,10,1000)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, the best is kept (default 3)")
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
        "--regex-timeout", type=float, default=2.0, help="seconds before the regex is cut off (default 2)"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        throughput(args.sizes, args.wildcards, args.repeat)
        adversarial(args.adversarial_n, args.adversarial_repeats, args.regex_timeout, args.repeat)
    except (RuntimeError, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
