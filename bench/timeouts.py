"""Delay between a block's deadline and its process tree being gone, for trees that ignore SIGTERM and one that obeys.

Three guides, each one `#test-setup` block with `timeout='T'`, run with `--grace G`:

  bash tree    the block's bash starts `bash -c 'trap "" TERM; sleep 1000 & wait'`:
               the inner bash and its sleep child ignore SIGTERM, so only SIGKILL
               after the grace period ends them
  python tree  the block's bash starts a Python process that ignores SIGTERM and
               sleeps: the harness first takes a py-spy stack dump of it
  wide tree    the block's bash starts five background sleeps and waits on a sixth;
               all obey SIGTERM, so the tree is gone at once and the harness should
               not wait for the grace period (nor part of it) before moving on

The block writes its start time (`date +%s.%N`) and the pids of its processes to
files. The benchmark polls /proc every 2 ms until every one of them has exited
(a zombie counts as gone) and reports gone - (start + T), and when the
harness itself has finished (its reports written). The target is grace + 1 s. For the python tree it also reports when the stack dump file was
written, after the deadline. The block's start is taken a few milliseconds
after the harness's own clock starts, which makes the delays a little longer.

    python bench/timeouts.py [--timeout 2] [--grace 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, alive, interleaved, median, verdict

POLL_S = 0.002
TARGET_SLACK_S = 1.0  # the target is grace + this


@dataclass(frozen=True)
class TreeKind:
    """A kind of process tree, and how many pids its block writes."""

    name: str
    body_template: str  # {dir} is the work directory, {python} this interpreter
    pid_count: int
    what: str  # for the summary: how the tree treats SIGTERM


TREES = (
    TreeKind(
        "bash tree",
        "date +%s.%N > {dir}/start\n"
        "echo $$ >> {dir}/pids\n"
        "bash -c 'trap \"\" TERM; echo $$ >> {dir}/pids; sleep 1000 & echo $! >> {dir}/pids; wait'",
        3,
        "ignoring SIGTERM",
    ),
    TreeKind(
        "python tree",
        "date +%s.%N > {dir}/start\n"
        "echo $$ >> {dir}/pids\n"
        "{python} -c 'import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        ' open("{dir}/pids", "a").write(f"{{os.getpid()}}\\n"); time.sleep(1000)\'',
        2,
        "ignoring SIGTERM",
    ),
    TreeKind(
        "wide tree",
        "date +%s.%N > {dir}/start\n"
        "echo $$ >> {dir}/pids\n"
        "for i in 1 2 3 4 5; do sleep 1000 & echo $! >> {dir}/pids; done\n"
        "sleep 1000; echo never",  # a command after the sleep, so bash does not exec it
        6,
        "obeying SIGTERM, 6 processes",
    ),
)


@dataclass(frozen=True)
class StopTiming:
    """One run: seconds after the deadline until the tree was gone, and until the stack dump was written."""

    gone_after_s: float
    finished_after_s: float  # the harness has exited, its reports written
    dump_after_s: float | None  # None: no dump was taken (no Python process, or py-spy failed)
    dump_note: str  # why there is no dump, when there is none


def wait_for(predicate: Callable[[], bool], limit_s: float, what: str) -> None:
    until = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > until:
            raise CommandFailed(f"gave up waiting for {what} after {limit_s:g} s")
        time.sleep(POLL_S)


def run_once(tree: TreeKind, timeout_s: float, grace_s: float, work: Path) -> StopTiming:
    for stale in ("start", "pids"):
        (work / stale).unlink(missing_ok=True)
    if not re.fullmatch(r"[\w/.-]+", f"{work}{sys.executable}"):
        raise CommandFailed(f"paths with special characters are not supported here: {work}, {sys.executable}")
    body = tree.body_template.format(dir=work, python=sys.executable)
    guide = work / "guide.md"
    guide.write_text(f"# Timeouts\n\n```shell #test-setup id=\"hang\" timeout='{timeout_s:g}'\n{body}\n```\n")
    out = work / f"out-{time.monotonic_ns()}"
    with open(work / "ci.log", "wb") as log:
        harness = subprocess.Popen(
            [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out), "--grace", f"{grace_s:g}"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        pids_file = work / "pids"

        def all_pids_written() -> bool:
            return pids_file.exists() and len(pids_file.read_text().split()) >= tree.pid_count

        wait_for(all_pids_written, 30, "the block's pids")
        pids = [int(word) for word in pids_file.read_text().split()]
        deadline = float((work / "start").read_text().strip()) + timeout_s
        wait_for(lambda: not any(alive(pid) for pid in pids), timeout_s + grace_s + 120, "the tree to be gone")
        gone_at = time.time()
        code = harness.wait(timeout=120)
        finished_at = time.time()
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    if code != 1:
        raise CommandFailed(f"ci.run exited {code}, expected 1 (a timed-out block)")
    block = json.loads((out / "results.json").read_text(encoding="utf-8"))["blocks"][0]
    if block["status"] != "timed_out":
        raise CommandFailed(f"the block was {block['status']}, not timed_out: {block['message']}")
    dump_after_s = None
    if block["stack_dumps"]:
        dump_after_s = (out / block["stack_dumps"][0]).stat().st_mtime - deadline
    notes = "; ".join(block["stack_dump_notes"])
    return StopTiming(gone_at - deadline, finished_at - deadline, dump_after_s, notes)


@dataclass(frozen=True)
class TimeoutResult:
    """Median and worst delays per tree kind."""

    timeout_s: float
    grace_s: float
    runs: dict[str, list[StopTiming]]  # tree name -> one timing per repetition


def run_timeouts(timeout_s: float, grace_s: float, repeat: int, section: Section) -> TimeoutResult:
    timings: dict[str, list[StopTiming]] = {tree.name: [] for tree in TREES}
    with tempfile.TemporaryDirectory(prefix="gg-timeouts-") as tmp:

        def runner(tree: TreeKind) -> Callable[[int], float]:
            def run(_: int) -> float:
                timing = run_once(tree, timeout_s, grace_s, Path(tmp) / tree.name.replace(" ", "-"))
                timings[tree.name].append(timing)
                return timing.gone_after_s

            return run

        for tree in TREES:
            (Path(tmp) / tree.name.replace(" ", "-")).mkdir()
        interleaved({tree.name: runner(tree) for tree in TREES}, repeat)
    target_s = grace_s + TARGET_SLACK_S
    section.line(
        f"block timeout={timeout_s:g}s, --grace {grace_s:g}; seconds from the deadline; median (worst) of {repeat}"
    )
    section.table(
        f"{'tree':>12} {'gone after':>14} {'harness done after':>20} {'dump written after':>20} {'target':>8}"
    )
    for tree in TREES:
        runs = timings[tree.name]
        gone = [run.gone_after_s for run in runs]
        finished = [run.finished_after_s for run in runs]
        dumps = [run.dump_after_s for run in runs if run.dump_after_s is not None]
        dump_text = f"{median(dumps):.3f} ({max(dumps):.3f})" if dumps else "-"
        section.line(
            f"{tree.name:>12} {f'{median(gone):.3f} ({max(gone):.3f})':>14}"
            f" {f'{median(finished):.3f} ({max(finished):.3f})':>20} {dump_text:>20} {f'<= {target_s:g}':>8}"
        )
        notes = sorted({run.dump_note for run in runs if run.dump_note})
        for note in notes:
            section.line(f"{'':>12} note: {note}")
        section.summary.append(
            SummaryRow(
                "timeouts",
                f"deadline -> {tree.name} {tree.what} gone (grace {grace_s:g} s)"
                + (", after a py-spy dump" if tree.name == "python tree" else ""),
                f"{median(gone):.2f} s (worst {max(gone):.2f} s)",
                f"harness done at +{median(finished):.2f} s (worst {max(finished):.2f} s)"
                + (f"; py-spy dump written at +{median(dumps):.2f} s" if dumps else ""),
                "",
                f"<= {target_s:g} s",
                verdict(max(gone) <= target_s),
            )
        )
    return TimeoutResult(timeout_s, grace_s, timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="the block's timeout in seconds (default 2)")
    parser.add_argument("--grace", type=float, default=1.0, help="--grace of the run in seconds (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.timeout <= 0 or args.grace < 0:
        parser.error("--repeat must be at least 1, --timeout above 0 and --grace not negative")
    try:
        run_timeouts(args.timeout, args.grace, args.repeat, Section("Timeouts"))
    except (CommandFailed, OSError, subprocess.TimeoutExpired) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
