"""Per-block overhead of `python -m ci.run`, side by side with plain bash, a subprocess+regex baseline, prysk and byexample.

For each N, a guide of N trivial `#test` blocks (`echo hello I`, expected `hello I`) is
run these ways, each timed as a whole command (interpreter start included):

  bash       one `bash -c BODY` process per block, driven by one bash loop, stdout to a file (the floor)
  baseline   what the reference engine documents: in one Python process,
             `subprocess.run(["bash", "-c", body], capture_output=True)` per block,
             then a `.*?`-joined regular expression match of its stdout
  base+files the same baseline capturing as the contract requires: stdout and stderr
             of each block to two new files (read back for the match), so the
             cost of keeping output on disk is the same on both sides
  prysk      the same commands and outputs as a cram-style `.t` file (`prysk --shell bash`)
  byexample  the same as a Markdown file of `$ echo hello I` examples (`byexample -l shell`)
  ci.run     `python -m ci.run GUIDE --output-dir TMP`

prysk and byexample run every command of a file in one long-lived shell (no
process per block, no separate output files), so they are not the same job:
they show what a tool that gives up isolation costs. They are left out, with
"not installed", when absent.

At the breakdown size (200 when measured, else the largest N) three more
commands run in the same rounds: `--help`, `--list GUIDE`, and the guide with
every block `skip=''`, which costs everything but the blocks (interpreter,
imports, parse, plan, results.json): the fixed cost. Between consecutive N's,
(t2 - t1) / (N2 - N1) is each tool's marginal cost per block.

Each repetition (`--repeat`, default 3) runs all of them one after the other
(order rotating), so they see the same machine load; the medians are kept. The
targets are reported (not enforced): ci.run <= 1.5x bash and faster than the
baseline at N=200. Exit status is non-zero only when something errs (a run
fails or a block does not pass), never on a missed target.

    python bench/overhead.py [--sizes 50,200,1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import (
    NOT_INSTALLED,
    REPO,
    CommandFailed,
    Section,
    SummaryRow,
    Timing,
    find_tool,
    int_list,
    interleaved,
    median,
    precompiled_copy,
    run_timed,
    verdict,
)

TARGET_SIZE = 200
TARGET_RATIO = 1.5
ALTERNATIVES = ("prysk", "byexample")
FILES_BASELINE = "base+files"
TOOLS = ("bash", "baseline", FILES_BASELINE, *ALTERNATIVES, "ci.run")  # the columns of the main table
HELP, LIST, SKIPPED, PRECOMPILED = "--help", "--list", "all skipped", "ci.run, precompiled"

# The baselines, run as their own interpreter so that their start-up is counted as ci.run's is.
_BASELINE_HEAD = r"""
import json, os, re, subprocess, sys

def pattern(body):
    return "".join(".*?" if i % 2 else re.escape(part) for i, part in enumerate(re.split(r"(\.\.\.)", body)))

def matches(expected, code, stdout):
    text = stdout.decode("utf-8", "replace")
    return code == 0 and re.fullmatch(pattern(expected) + r"\n*", text, re.DOTALL) is not None

failures = 0
"""
BASELINE_SCRIPT = (
    _BASELINE_HEAD
    + r"""
for body, expected in json.load(open(sys.argv[1], encoding="utf-8")):
    done = subprocess.run(["bash", "-c", body], capture_output=True)
    failures += not matches(expected, done.returncode, done.stdout)
sys.exit(1 if failures else 0)
"""
)
FILES_BASELINE_SCRIPT = (
    _BASELINE_HEAD
    + r"""
os.makedirs(sys.argv[2])
for index, (body, expected) in enumerate(json.load(open(sys.argv[1], encoding="utf-8"))):
    stem = os.path.join(sys.argv[2], str(index))
    with open(stem + ".stdout.txt", "wb") as stdout, open(stem + ".stderr.txt", "wb") as stderr:
        done = subprocess.run(["bash", "-c", body], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    with open(stem + ".stdout.txt", "rb") as stdout:
        failures += not matches(expected, done.returncode, stdout.read())
sys.exit(1 if failures else 0)
"""
)


def block_bodies(count: int) -> list[tuple[str, str]]:
    """(command, expected stdout) of each trivial block."""
    return [(f"echo hello {index}", f"hello {index}") for index in range(count)]


def write_guide(path: Path, blocks: list[tuple[str, str]], *, skip: bool = False) -> None:
    """A guide of `#test` blocks with their results; with `skip`, every block is `skip=''`."""
    extra = " skip=''" if skip else ""
    parts = ["# Overhead benchmark\n\n"]
    for index, (command, expected) in enumerate(blocks):
        parts.append(f'```shell #test id="b{index}"{extra}\n{command}\n```\n\n')
        parts.append(f'```shell #test-result id="b{index}"\n{expected}\n```\n\n')
    path.write_text("".join(parts), encoding="utf-8")


def write_bash_loop(path: Path, blocks: list[tuple[str, str]], out_dir: Path) -> None:
    """A bash script starting one `bash -c BODY` per block, stdout to a file, stopping on failure."""
    lines = ["set -e"]
    for index, (command, _) in enumerate(blocks):
        lines.append(f"bash -c {shlex.quote(command)} > {shlex.quote(str(out_dir / f'{index}.out'))}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_prysk(path: Path, blocks: list[tuple[str, str]]) -> None:
    """A cram-style test file: two-space indented `$ command` lines followed by their output."""
    path.write_text("".join(f"  $ {command}\n  {expected}\n" for command, expected in blocks), encoding="utf-8")


def write_byexample(path: Path, blocks: list[tuple[str, str]]) -> None:
    """A Markdown file of shell examples: `$ command` and the expected output in one fence."""
    parts = ["# Overhead benchmark\n\n"]
    parts += [f"```shell\n$ {command}\n{expected}\n```\n\n" for command, expected in blocks]
    path.write_text("".join(parts), encoding="utf-8")


@dataclass(frozen=True)
class OverheadResult:
    """Median wall times in seconds per block count, and which alternatives could not run."""

    medians: dict[int, dict[str, float]]  # N -> tool (or breakdown command) -> wall seconds
    cpu_medians: dict[int, dict[str, float]]  # N -> tool -> CPU seconds (user + sys, children included)
    missing: tuple[str, ...]  # alternatives not installed
    breakdown_size: int


def installed_alternatives() -> dict[str, str]:
    """prysk and byexample executables that are installed, by name."""
    found = {name: find_tool(name) for name in ALTERNATIVES}
    return {name: path for name, path in found.items() if path is not None}


def measure(count: int, repeat: int, work: Path, *, breakdown: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU seconds of each way of running `count` blocks (and of the breakdown commands)."""
    here = work / f"n{count}"
    here.mkdir()
    blocks = block_bodies(count)
    guide, skipped_guide = here / "guide.md", here / "skipped.md"
    write_guide(guide, blocks)
    write_guide(skipped_guide, blocks, skip=True)
    pairs = here / "blocks.json"
    pairs.write_text(json.dumps(blocks), encoding="utf-8")
    bash_out = here / "bash-out"
    bash_out.mkdir()
    loop = here / "loop.sh"
    write_bash_loop(loop, blocks, bash_out)
    log = here / "last.log"
    python = sys.executable

    def command(argv: list[str], cwd: Path = here) -> Callable[[int], Timing]:
        return lambda _: run_timed(argv, cwd=cwd, log=log)

    def ci_run(source: Path, cwd: Path = REPO, tag: str = "") -> Callable[[int], Timing]:
        # a fresh output directory each time, as in a real run
        return lambda attempt: run_timed(
            [python, "-m", "ci.run", str(source), "--output-dir", str(here / f"out-{source.stem}{tag}-{attempt}")],
            cwd=cwd,
            log=log,
        )

    runs: dict[str, Callable[[int], Timing]] = {
        "bash": command(["bash", str(loop)]),
        "baseline": command([python, "-c", BASELINE_SCRIPT, str(pairs)]),
        # a fresh output directory each time, as for ci.run
        FILES_BASELINE: lambda attempt: run_timed(
            [python, "-c", FILES_BASELINE_SCRIPT, str(pairs), str(here / f"files-{attempt}")], cwd=here, log=log
        ),
    }
    tools = installed_alternatives()
    if "prysk" in tools:
        prysk_file = here / "blocks.t"
        write_prysk(prysk_file, blocks)
        runs["prysk"] = command([tools["prysk"], "--shell", shutil.which("bash") or "/bin/bash", "-q", str(prysk_file)])
    if "byexample" in tools:
        byexample_file = here / "examples.md"
        write_byexample(byexample_file, blocks)
        runs["byexample"] = command([tools["byexample"], "-l", "shell", "-q", str(byexample_file)])
    runs["ci.run"] = ci_run(guide)
    if breakdown:
        runs[HELP] = command([python, "-m", "ci.run", "--help"], cwd=REPO)
        runs[LIST] = command([python, "-m", "ci.run", "--list", str(guide)], cwd=REPO)
        runs[SKIPPED] = ci_run(skipped_guide)
        runs[PRECOMPILED] = ci_run(guide, precompiled_copy(here / "precompiled"), "-precompiled")
    samples = interleaved(runs, repeat)
    wall = {name: median([timing.wall_s for timing in values]) for name, values in samples.items()}
    cpu = {name: median([timing.cpu_s for timing in values]) for name, values in samples.items()}
    return wall, cpu


def marginal_ms(medians: dict[int, dict[str, float]], name: str) -> list[tuple[int, int, float]]:
    """(N1, N2, ms per block) between consecutive sizes: (t(N2) - t(N1)) / (N2 - N1)."""
    sizes = sorted(count for count, times in medians.items() if name in times)
    return [
        (first, second, 1000 * (medians[second][name] - medians[first][name]) / (second - first))
        for first, second in itertools.pairwise(sizes)
    ]


def ratio_text(ours: float, other: float | None) -> str:
    return "-" if other is None else f"{ours / other:.2f}x"


def run_overhead(sizes: list[int], repeat: int, section: Section) -> OverheadResult:
    """Measure every size, print the tables into `section`, add its summary rows; CommandFailed on errors."""
    missing = tuple(name for name in ALTERNATIVES if name not in installed_alternatives())
    for name in missing:
        section.line(f"{name}: {NOT_INSTALLED} (pip install {name}); its columns show -")
    breakdown_size = TARGET_SIZE if TARGET_SIZE in sizes else max(sizes)
    section.line(
        f"median of {repeat} run(s) each, interleaved; wall time of the whole command, interpreter start included"
    )
    columns = "".join(f" {name + ' s':>12}" for name in TOOLS)
    ratios = "".join(f" {'ci/' + name:>13}" for name in TOOLS if name != "ci.run")
    section.table(f"{'N':>6}{columns}{ratios} {'ci ms/block':>12}")
    medians: dict[int, dict[str, float]] = {}
    cpu_medians: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gg-overhead-") as tmp:
        for count in sizes:
            times, cpu_medians[count] = measure(count, repeat, Path(tmp), breakdown=count == breakdown_size)
            medians[count] = times
            cells = "".join(f" {times[name]:>12.3f}" if name in times else f" {'-':>12}" for name in TOOLS)
            ratio_cells = "".join(
                f" {ratio_text(times['ci.run'], times.get(name)):>13}" for name in TOOLS if name != "ci.run"
            )
            section.line(f"{count:>6}{cells}{ratio_cells} {1000 * times['ci.run'] / count:>12.2f}")
    result = OverheadResult(medians, cpu_medians, missing, breakdown_size)
    print_cpu(result, section)
    print_breakdown(result, section)
    summarize(result, section)
    return result


def print_cpu(result: OverheadResult, section: Section) -> None:
    """The same runs in CPU seconds, which load from other processes on the machine disturbs less."""
    section.line("")
    section.line("CPU time of the same runs (user + sys, children included; medians): less disturbed by other load")
    columns = "".join(f" {name + ' s':>12}" for name in TOOLS)
    compared = ("bash", "baseline", FILES_BASELINE)
    section.table(f"{'N':>6}{columns}" + "".join(f" {'ci/' + name:>13}" for name in compared))
    for count, cpu in result.cpu_medians.items():
        cells = "".join(f" {cpu[name]:>12.3f}" if name in cpu else f" {'-':>12}" for name in TOOLS)
        ratios = "".join(f" {ratio_text(cpu['ci.run'], cpu[name]):>13}" for name in compared)
        section.line(f"{count:>6}{cells}{ratios}")


def print_breakdown(result: OverheadResult, section: Section) -> None:
    size = result.breakdown_size
    times = result.medians[size]
    per_block_ms = 1000 * (times["ci.run"] - times[SKIPPED]) / size
    rows = [
        ("python -m ci.run --help", f"{times[HELP]:.3f} s", "interpreter, argparse, the ci package"),
        ("python -m ci.run --list GUIDE", f"{times[LIST]:.3f} s", "and markdown-it, parse, plan"),
        (f"ci.run, all {size} blocks skip=''", f"{times[SKIPPED]:.3f} s", "fixed cost: and the run's imports, reports"),
        (f"ci.run, {size} blocks run", f"{times['ci.run']:.3f} s", f"{times['ci.run'] / times['bash']:.2f}x bash"),
        (
            f"ci.run, {size} blocks run, precompiled",
            f"{times[PRECOMPILED]:.3f} s",
            f"{times[PRECOMPILED] / times['bash']:.2f}x bash; ci/ bytecode compiled beforehand",
        ),
        (
            "per block: (run - all skipped) / N",
            f"{per_block_ms:.2f} ms",
            f"bash loop {1000 * times['bash'] / size:.2f} ms",
        ),
    ]
    section.line("")
    section.line(f"fixed and per-block cost of ci.run at N={size} (medians of the same rounds)")
    for label, value, note in rows:
        section.line(f"  {label:<38} {value:>9}   {note}".rstrip())
    if len(result.medians) >= 2:
        section.line("")
        sizes = sorted(result.medians)
        steps = [f"{first}->{second}" for first, second in itertools.pairwise(sizes)]
        section.line("marginal cost per block between sizes, ms: (t(N2) - t(N1)) / (N2 - N1), start-up cancelled out")
        section.table(f"{'tool':>10}" + "".join(f" {step:>11}" for step in steps))
        for name in TOOLS:
            costs = marginal_ms(result.medians, name)
            if costs:
                section.line(f"{name:>10}" + "".join(f" {ms:>11.2f}" for _, _, ms in costs))


def summarize(result: OverheadResult, section: Section) -> None:
    for count, times in result.medians.items():
        ours = times["ci.run"]
        if count == TARGET_SIZE:
            bash_ratio = ours / times["bash"]
            section.summary.append(
                SummaryRow(
                    "overhead",
                    f"{count} trivial blocks vs bash floor",
                    f"{ours:.3f} s",
                    f"bash {times['bash']:.3f} s",
                    f"{bash_ratio:.2f}x",
                    f"<= {TARGET_RATIO}x",
                    verdict(bash_ratio <= TARGET_RATIO),
                )
            )
            cpu = result.cpu_medians[count]
            section.summary.append(
                SummaryRow(
                    "overhead",
                    f"{count} trivial blocks, CPU time, vs bash / baseline",
                    f"{cpu['ci.run']:.3f} s",
                    f"bash {cpu['bash']:.3f} s / baseline {cpu['baseline']:.3f} s",
                    f"{cpu['ci.run'] / cpu['bash']:.2f}x / {cpu['ci.run'] / cpu['baseline']:.2f}x",
                    "",
                    "",
                )
            )
            section.summary.append(
                SummaryRow(
                    "overhead",
                    f"{count} trivial blocks vs baseline",
                    f"{ours:.3f} s",
                    f"baseline {times['baseline']:.3f} s",
                    f"{ours / times['baseline']:.2f}x",
                    "< 1x (faster)",
                    verdict(ours < times["baseline"]),
                )
            )
            section.summary.append(
                SummaryRow(
                    "overhead",
                    f"{count} trivial blocks vs baseline keeping output in files, as the contract asks",
                    f"{ours:.3f} s",
                    f"base+files {times[FILES_BASELINE]:.3f} s",
                    f"{ours / times[FILES_BASELINE]:.2f}x",
                    "",
                    "",
                )
            )
        else:
            section.summary.append(
                SummaryRow(
                    "overhead",
                    f"{count} trivial blocks vs bash / baseline",
                    f"{ours:.3f} s",
                    f"bash {times['bash']:.3f} s / baseline {times['baseline']:.3f} s",
                    f"{ours / times['bash']:.2f}x / {ours / times['baseline']:.2f}x",
                    "",
                    "",
                )
            )
        for name in ALTERNATIVES:
            if name in result.missing and count == result.breakdown_size:
                section.summary.append(
                    SummaryRow(
                        "overhead", f"{count} blocks vs {name}", f"{ours:.3f} s", f"{name} {NOT_INSTALLED}", "", "", ""
                    )
                )
            if name in times and count == result.breakdown_size:
                section.summary.append(
                    SummaryRow(
                        "overhead",
                        f"{count} blocks vs {name} (one shell for all)",
                        f"{ours:.3f} s",
                        f"{name} {times[name]:.3f} s",
                        f"{ours / times[name]:.2f}x",
                        "",
                        "",
                    )
                )
    times = result.medians[result.breakdown_size]
    section.summary.append(
        SummaryRow(
            "overhead",
            f"{result.breakdown_size} blocks, ci/ bytecode precompiled, vs bash",
            f"{times[PRECOMPILED]:.3f} s",
            f"bash {times['bash']:.3f} s",
            f"{times[PRECOMPILED] / times['bash']:.2f}x",
            "",
            "",
        )
    )
    section.summary.append(
        SummaryRow(
            "overhead",
            f"fixed cost (all {result.breakdown_size} blocks skipped)",
            f"{times[SKIPPED]:.3f} s",
            f"--help {times[HELP]:.3f} s, --list {times[LIST]:.3f} s",
            "",
            "",
            "",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int_list, default=[50, 200, 1000], help="block counts (default 50,200,1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is kept (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    section = Section("Overhead")
    try:
        result = run_overhead(args.sizes, args.repeat, section)
    except (CommandFailed, OSError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    if TARGET_SIZE in result.medians:
        times = result.medians[TARGET_SIZE]
        ratio = times["ci.run"] / times["bash"]
        faster = "faster" if times["ci.run"] < times["baseline"] else "slower"
        print(
            f"target at N={TARGET_SIZE}: ci.run <= {TARGET_RATIO}x bash: {ratio:.2f}x ({verdict(ratio <= TARGET_RATIO)});"
            f" {faster} than the baseline: {times['ci.run'] / times['baseline']:.2f}x"
            f" ({verdict(times['ci.run'] < times['baseline'])})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
