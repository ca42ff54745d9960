"""The plain-fence dialect's search (`ci.expect.search.search_file`) side by side with the reference's regex search.

Two cases per output size n (characters):

- `log`: n characters of training-log lines, the expected text
  `load_tensors: ...CANN0 model buffer size = ...` on the last line but one
  (the llama.cpp guide's check): the search is mostly `str.find`;
- `adversarial`: `a` * n against `xxx.bin` (a word placeholder, then a
  literal the output never holds). The reference's regex, `[^,\\s]+?\\.bin`,
  extends its lazy run from every start to the end of the run of `a`s: about
  n^2 / 2 steps. Ours reads each character once.

Ours is the best of `--repeat` runs on the file (read in windows, as the
runner reads a step's output); the regex (the reference's way: placeholders
made patterns, the rest escaped, `...` a lazy DOTALL `.*?`, `re.search` on
the lines joined by "\\n") runs in a child process that has already read
the output, cut off after `--regex-timeout` seconds (`>T`); once cut off,
larger n are not tried (`-`). The growth exponent is log(t2/t1)/log(n2/n1)
between the two largest sizes: about 1 is linear, 2 quadratic.

    python bench/search.py [--sizes 10000,100000,1000000] [--repeat 3] [--regex-timeout 20]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from pathlib import Path

from common import Section, SummaryRow, int_list, probe_seconds, verdict

from ci.expect.search import search_file

LOG_EXPECTED = "load_tensors: ...CANN0 model buffer size = ..."
ADVERSARIAL_EXPECTED = "xxx.bin"
LINEAR_EXPONENT = 1.3  # a measured exponent up to this is taken as linear (timer noise)

# Reads the output first, says "ready", and only then times the search.
REGEX_PROBE = r"""
import re, sys, time
pattern = open(sys.argv[1], encoding="utf-8").read()
actual = "\n".join(open(sys.argv[2], "rb").read().decode("utf-8", "replace").splitlines())
compiled = re.compile(pattern, re.DOTALL)
print("ready", flush=True)
started = time.perf_counter()
found = compiled.search(actual) is not None
print(time.perf_counter() - started, found, flush=True)
"""


def reference_pattern(expected: str) -> str:
    """The reference's regular expression for EXPECTED (re-derived from what it does, for comparison)."""
    rules = [(re.compile(r"\b\d+\.\d+\.x\b"), r"\d+\.\d+\.\d+"), (re.compile(r"\bxxx\b"), r"[^,\s]+?")]
    text = expected
    for index, (found, _) in enumerate(rules):
        text = found.sub(f"\x01P{index}\x01", text)
    pattern = re.escape(text)
    for index, (_, becomes) in enumerate(rules):
        pattern = pattern.replace(f"\x01P{index}\x01", becomes)
    return pattern.replace(r"\.\.\.", ".*?")


def write_case(path: Path, case: str, n: int) -> str:
    """Write the output of CASE with about N characters; its expected text."""
    if case == "adversarial":
        path.write_text("a" * n, encoding="utf-8")
        return ADVERSARIAL_EXPECTED
    line = "step 000001 loss 2.3456 lr 0.0001 tokens/s 01234 grad_norm 0.98\n"
    body = line * max(1, n // len(line))
    tail = "0.00.734.851 I load_tensors:        CANN0 model buffer size =     0.00 MiB\nmain: done\n"
    path.write_text(body + tail, encoding="utf-8")
    return LOG_EXPECTED


def ours_seconds(path: Path, expected: str, repeat: int) -> tuple[float, bool]:
    best, found = float("inf"), False
    for _ in range(repeat):
        started = time.perf_counter()
        found = search_file(str(path), expected)
        best = min(best, time.perf_counter() - started)
    return max(best, 1e-9), found


def regex_seconds(path: Path, expected: str, timeout_s: float, work: Path) -> tuple[float, bool] | None:
    """(seconds, found) of the reference's regex in a child process; None when cut off at the timeout."""
    pattern_file = work / "pattern.txt"
    pattern_file.write_text(reference_pattern(expected), encoding="utf-8")
    return probe_seconds(REGEX_PROBE, [str(pattern_file), str(path)], timeout_s)


def exponent(points: list[tuple[int, float]]) -> str:
    if len(points) < 2:
        return "-"
    (n1, t1), (n2, t2) = points[-2:]
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def run_search(sizes: list[int], repeat: int, regex_timeout_s: float, section: Section) -> None:
    section.table(f"{'case':<12} {'n':>9} {'ours s':>9} {'regex s':>9} {'regex/ours':>10} {'verdicts':>9}")
    growth: dict[str, list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="gg-search-") as temp:
        work = Path(temp)
        for case in ("log", "adversarial"):
            cut_off = False
            for n in sizes:
                path = work / f"{case}-{n}.txt"
                expected = write_case(path, case, n)
                ours, found = ours_seconds(path, expected, repeat)
                growth.setdefault(case, []).append((n, ours))
                regex = None if cut_off else regex_seconds(path, expected, regex_timeout_s, work)
                if regex is None:
                    shown, ratio, agree = ("-" if cut_off else f">{regex_timeout_s:g}"), "-", "-"
                    cut_off = True
                else:
                    shown, ratio = f"{regex[0]:.4f}", f"{regex[0] / ours:.1f}x"
                    agree = "same" if regex[1] == found else "DIFFER"
                section.line(f"{case:<12} {n:>9} {ours:>9.4f} {shown:>9} {ratio:>10} {agree:>9}")
    section.line()
    for case, points in growth.items():
        section.line(f"growth exponent of ours ({case}): {exponent(points)}")
    adversarial = exponent(growth["adversarial"])
    linear = adversarial != "-" and float(adversarial) <= LINEAR_EXPONENT
    section.summary.append(
        SummaryRow(
            "search",
            "fences dialect, `xxx.bin` in `a` * n: growth exponent",
            adversarial,
            "the reference's regex: quadratic, cut off",
            "",
            f"linear (<= {LINEAR_EXPONENT})",
            verdict(linear),
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int_list, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--regex-timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    run_search(args.sizes, args.repeat, args.regex_timeout, Section("Search"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
