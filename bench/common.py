"""Shared helpers of the benchmarks: timed commands, interleaved repetitions, peak memory, summary rows."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

Sample = TypeVar("Sample")
REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
NOT_INSTALLED = "not installed"


@dataclass(frozen=True)
class SummaryRow:
    """One line of the summary table: a figure of ours, what it is compared with, and its target."""

    benchmark: str  # overhead, matching, memory, timeouts, startup
    measure: str  # what was measured, in a few words
    ours: str  # guide-guard's figure, with its unit
    reference: str  # the figure it is compared with (named), or "" when there is none
    ratio: str  # ours / reference, or ""
    target: str  # the target, or "" when the row only informs
    verdict: str  # "met", "MISSED", or "" when there is no target


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


class Section:
    """A benchmark's printed tables: each line goes to stdout at once and is kept for docs/performance.md."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.lines: list[str] = []
        self.summary: list[SummaryRow] = []
        self.notes: list[str] = []  # caveats shown under the section in the document

    def line(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def table(self, header: str) -> None:
        self.line(header)
        self.line("-" * len(header))


class CommandFailed(RuntimeError):
    """A benchmarked command exited with an unexpected status (the benchmark is then wrong, not slow)."""


@dataclass(frozen=True)
class Timing:
    """Wall and CPU time of one command (CPU includes the children it waited for)."""

    wall_s: float
    cpu_s: float
    exit_code: int


def run_timed(
    argv: Sequence[str],
    *,
    cwd: Path = REPO,
    log: Path | None = None,
    expect: Sequence[int] = (0,),
    env: dict[str, str] | None = None,
) -> Timing:
    """Run a command, output to `log` (else discarded), and time it; CommandFailed on an unexpected exit."""
    sink = open(log, "wb") if log is not None else open(os.devnull, "wb")  # noqa: SIM115 -- closed below
    try:
        started = time.perf_counter()
        child = subprocess.Popen(list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
    finally:
        sink.close()
    if child.returncode not in expect:
        tail = log.read_bytes()[-2000:].decode("utf-8", "replace") if log is not None else ""
        raise CommandFailed(f"{' '.join(str(a) for a in argv[:4])} ... exited {child.returncode}:\n{tail}")
    return Timing(wall_s, usage.ru_utime + usage.ru_stime, child.returncode)


def interleaved(runs: dict[str, Callable[[int], Sample]], repeat: int) -> dict[str, list[Sample]]:
    """Run every measurement `repeat` times, taking turns, so a load spike hits all of them.

    The order rotates from one round to the next, so that no measurement
    always comes first (after an idle pause) or last.
    """
    names = list(runs)
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for attempt in range(repeat):
        shift = attempt % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(runs[name](attempt))
    return samples


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            state = handle.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def find_tool(name: str) -> str | None:
    """A command installed beside this interpreter (its virtualenv), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


# Started by the benchmark, this small interpreter forks and its child execs the measured command,
# so the command's ru_maxrss starts from this launcher's few MiB: Linux carries the peak across
# exec, and a command spawned straight from a large parent would report the parent's memory.
_RSS_LAUNCHER = r"""
import json, os, sys, time
report = sys.argv[1]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as handle:
    json.dump({"exit_code": os.waitstatus_to_exitcode(status), "max_rss_bytes": usage.ru_maxrss * 1024,
               "wall_s": time.perf_counter() - started, "cpu_s": usage.ru_utime + usage.ru_stime}, handle)
"""


@dataclass(frozen=True)
class PeakMemory:
    """Peak resident memory of a command (the largest single process of its tree) and its time."""

    max_rss_bytes: int
    wall_s: float
    exit_code: int


def run_peak_memory(argv: Sequence[str], *, cwd: Path = REPO, log: Path | None = None) -> PeakMemory:
    """Run a command through the fork launcher and return its peak RSS (floor: the launcher's ~10 MiB)."""
    with tempfile.TemporaryDirectory(prefix="gg-rss-") as tmp:
        report = Path(tmp) / "rss.json"
        run_timed([sys.executable, "-c", _RSS_LAUNCHER, str(report), *argv], cwd=cwd, log=log, expect=range(256))
        values = json.loads(report.read_text(encoding="utf-8"))
    return PeakMemory(int(values["max_rss_bytes"]), float(values["wall_s"]), int(values["exit_code"]))


def precompiled_copy(directory: Path) -> Path:
    """Copy the `ci` package into `directory` with its bytecode compiled; run `-m ci.run` from there to use it.

    An editable install under PYTHONDONTWRITEBYTECODE=1 never caches bytecode, so
    every start compiles the harness's sources; this copy shows what compiling
    them once, at install time, saves.
    """
    import compileall

    shutil.copytree(REPO / "ci", directory / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    if not compileall.compile_dir(str(directory / "ci"), quiet=1):
        raise CommandFailed(f"compileall failed on {directory / 'ci'}")
    return directory


def int_list(text: str) -> list[int]:
    """argparse type: a comma-separated list of positive integers."""
    import argparse

    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive integers, e.g. 50,200")
    return values


def seconds_text(value_s: float) -> str:
    """A duration with a unit that keeps three significant digits."""
    if value_s < 1:
        return f"{value_s * 1000:.0f} ms" if value_s >= 0.01 else f"{value_s * 1000:.2f} ms"
    return f"{value_s:.2f} s"


def mib_text(value_bytes: float) -> str:
    return f"{value_bytes / MIB:,.0f} MiB" if value_bytes >= 10 * MIB else f"{value_bytes / MIB:.1f} MiB"


def probe_seconds(probe: str, args: Sequence[str], timeout_s: float) -> tuple[float, bool] | None:
    """Run PROBE (Python source) in a child process with ARGS: it reads its inputs, prints "ready", times its one
    search and prints "SECONDS FOUND". (seconds, found); None when cut off at TIMEOUT_S after "ready"."""
    child = subprocess.Popen([sys.executable, "-c", probe, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise CommandFailed("the regex probe did not start")
        try:
            # not communicate(): with a timeout it reads the raw pipe, skipping what readline() buffered
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        seconds, found = child.stdout.read().split()
        return float(seconds), found == "True"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
