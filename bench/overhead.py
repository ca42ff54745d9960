"""Per-block overhead of `python -m ci.run`, side by side with plain bash and a subprocess+regex baseline.

For each N, a guide of N trivial `#test` blocks (`echo hello I`, expected `hello I`) is
run three ways, each timed as a whole command (interpreter start included):

  bash      one `bash -c BODY` process per block, driven by one bash loop (the floor)
  baseline  what the reference engine documents: in one Python process,
            `subprocess.run(["bash", "-c", body], capture_output=True)` per block,
            then a `.*?`-joined regular expression match of its stdout
  ci.run    `python -m ci.run GUIDE --output-dir TMP`

Each repetition (`--repeat`, default 3) runs the three one after the other, so
they see the same machine load; the medians are kept. The target
reported (not enforced) is ci.run <= 1.5x bash at N=200. Exit status is non-zero
only when something errs (a run fails or a block does not pass), never on a
missed target.

    python bench/overhead.py [--sizes 50,200,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_SIZE = 200
TARGET_RATIO = 1.5

# The baseline, run as its own interpreter so that its start-up is counted as ci.run's is.
BASELINE_SCRIPT = r"""
import json, re, subprocess, sys

def pattern(body):
    return "".join(".*?" if i % 2 else re.escape(part) for i, part in enumerate(re.split(r"(\.\.\.)", body)))

failures = 0
for body, expected in json.load(open(sys.argv[1], encoding="utf-8")):
    done = subprocess.run(["bash", "-c", body], capture_output=True)
    stdout = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0 or re.fullmatch(pattern(expected) + r"\n*", stdout, re.DOTALL) is None:
        failures += 1
sys.exit(1 if failures else 0)
"""


def block_bodies(count: int) -> list[tuple[str, str]]:
    """(command, expected stdout) of each trivial block."""
    return [(f"echo hello {index}", f"hello {index}") for index in range(count)]


def write_guide(path: Path, blocks: list[tuple[str, str]]) -> None:
    parts = ["# Overhead benchmark\n\n"]
    for index, (command, expected) in enumerate(blocks):
        parts.append(f'```shell #test id="b{index}"\n{command}\n```\n\n')
        parts.append(f'```shell #test-result id="b{index}"\n{expected}\n```\n\n')
    path.write_text("".join(parts), encoding="utf-8")


def write_bash_loop(path: Path, blocks: list[tuple[str, str]], out_dir: Path) -> None:
    """A bash script starting one `bash -c BODY` per block, stdout to a file, stopping on failure."""
    lines = ["set -e"]
    for index, (command, _) in enumerate(blocks):
        lines.append(f"bash -c {shlex.quote(command)} > {shlex.quote(str(out_dir / f'{index}.out'))}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(argv: list[str], cwd: Path) -> float:
    """Wall time of one command; raises when it fails."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode("utf-8", "replace")[-2000:]
        raise RuntimeError(f"{' '.join(argv[:3])} ... exited {done.returncode}:\n{tail}")
    return elapsed


def measure(count: int, repeat: int, work: Path) -> dict[str, float]:
    """Median wall time in seconds of the three ways of running `count` blocks."""
    here = work / f"n{count}"
    here.mkdir()
    blocks = block_bodies(count)
    guide = here / "guide.md"
    write_guide(guide, blocks)
    pairs = here / "blocks.json"
    pairs.write_text(json.dumps(blocks), encoding="utf-8")
    bash_out = here / "bash-out"
    bash_out.mkdir()
    loop = here / "loop.sh"
    write_bash_loop(loop, blocks, bash_out)

    runs: dict[str, Callable[[int], float]] = {
        "bash": lambda _: timed(["bash", str(loop)], here),
        "baseline": lambda _: timed([sys.executable, "-c", BASELINE_SCRIPT, str(pairs)], here),
        "ci.run": lambda attempt: timed(
            [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(here / f"ci-out-{attempt}")], REPO
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for attempt in range(repeat):  # interleaved: a load spike hits all three, not one
        for name, run_once in runs.items():
            samples[name].append(run_once(attempt))
    return {name: statistics.median(values) for name, values in samples.items()}


def parse_sizes(text: str) -> list[int]:
    sizes = [int(item) for item in text.split(",") if item.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers, e.g. 50,200")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=[50, 200, 1000], help="block counts (default 50,200,1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is kept (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    header = f"{'N':>6} {'bash s':>9} {'baseline s':>11} {'ci.run s':>9} {'ci/bash':>8} {'ci/baseline':>12} {'ci ms/block':>12}"
    print(f"median of {args.repeat} run(s) each; wall time of the whole command, interpreter start included")
    print(header)
    print("-" * len(header))
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gg-overhead-") as tmp:
        for count in args.sizes:
            try:
                times = measure(count, args.repeat, Path(tmp))
            except (RuntimeError, OSError) as exc:
                print(f"[ERROR] N={count}: {exc}", file=sys.stderr)
                return 1
            results[count] = times
            print(
                f"{count:>6} {times['bash']:>9.3f} {times['baseline']:>11.3f} {times['ci.run']:>9.3f}"
                f" {times['ci.run'] / times['bash']:>7.2f}x {times['ci.run'] / times['baseline']:>11.2f}x"
                f" {1000 * times['ci.run'] / count:>12.2f}",
                flush=True,
            )
    if TARGET_SIZE in results:
        ratio = results[TARGET_SIZE]["ci.run"] / results[TARGET_SIZE]["bash"]
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
        print(f"target at N={TARGET_SIZE}: ci.run <= {TARGET_RATIO}x bash: {ratio:.2f}x ({verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
