"""Time from a stop signal to the harness's exit, wherever the run is when it comes; reports and leftovers checked.

Each situation is one small guide run with `--grace G` (10 s by default, the
harness's default). The benchmark waits until the harness is where the
situation says (the processes note it in files), sends the signal, and
measures until the harness has exited. It then checks the exit status
(128 + the signal), that results.json and the JUnit report were written, and
that none of the processes the blocks noted is still running.

  waiting on a block   a block whose bash notes SIGTERM and goes on (only SIGKILL ends it)
  grace period         that block with timeout='1': the signal comes once the time-out's SIGTERM was noted,
                       while the harness waits out the grace period
  stack dump           a Python block with timeout='1', and py-spy replaced by a SIMULATION that hangs:
                       the signal comes once it has started
  teardown             a block leaves a server that notes SIGTERM and goes on; the signal comes
                       once the teardown's SIGTERM was noted
  second signal        as teardown, with SIGINT 50 ms after the SIGTERM (the time is from the first)
  SIGHUP, a block      waiting on a block, SIGHUP instead of SIGTERM (a closed terminal)

The contract's target is 2 s whatever the harness is doing.

    python bench/signals.py [--grace 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, alive, interleaved, median, verdict

POLL_S = 0.002
SECOND_SIGNAL_AFTER_S = 0.05  # sent together, pending signals would be handled lowest number first: SIGINT
TARGET_S = 2.0
FENCE = "```"

# A SIMULATION of a py-spy that hangs (attached to a process stuck in the kernel, say): it notes its start and sleeps.
HUNG_PY_SPY = (
    "#!/bin/sh\n# SIMULATION: a py-spy that hangs\necho $$ >> {dir}/pids\necho up > {dir}/ready\nexec sleep 1000\n"
)


def trapping_loop(work: Path) -> str:
    """bash lines that note their pid, note every SIGTERM and go on: only SIGKILL ends them."""
    return f"trap 'echo TERM >> {work}/term' TERM\necho $$ >> {work}/pids\necho up > {work}/ready\nwhile :; do sleep 0.2; done\n"


def server_block(work: Path) -> str:
    quoted = trapping_loop(work).replace("'", "'\"'\"'")
    return (
        f"setsid nohup bash -c '{quoted}' > /dev/null 2>&1 < /dev/null &\n"
        f"while [ ! -s {work}/ready ]; do sleep 0.05; done\n"
    )


@dataclass(frozen=True)
class Situation:
    """Where the run is when the signal comes."""

    name: str
    guide: Callable[[Path], str]  # the guide's text, given the work directory
    ready_file: str  # the signal is sent once this file (in the work directory) is not empty
    signals: tuple[int, ...]  # sent in this order
    fake_py_spy: bool = False


SITUATIONS = (
    Situation(
        "waiting on a block",
        lambda work: f"{FENCE}shell #test-setup\n{trapping_loop(work)}{FENCE}\n",
        "ready",
        (signal.SIGTERM,),
    ),
    Situation(
        "grace period",
        lambda work: f"{FENCE}shell #test-setup timeout='1'\n{trapping_loop(work)}{FENCE}\n",
        "term",
        (signal.SIGTERM,),
    ),
    Situation(
        "stack dump",
        lambda work: f"{FENCE}python #test-setup timeout='1'\nimport time\ntime.sleep(1000)\n{FENCE}\n",
        "ready",
        (signal.SIGTERM,),
        fake_py_spy=True,
    ),
    Situation(
        "teardown", lambda work: f"{FENCE}shell #test-setup\n{server_block(work)}{FENCE}\n", "term", (signal.SIGTERM,)
    ),
    Situation(
        "second signal",
        lambda work: f"{FENCE}shell #test-setup\n{server_block(work)}{FENCE}\n",
        "term",
        (signal.SIGTERM, signal.SIGINT),
    ),
    Situation(
        "SIGHUP, a block",
        lambda work: f"{FENCE}shell #test-setup\n{trapping_loop(work)}{FENCE}\n",
        "ready",
        (signal.SIGHUP,),
    ),
)


@dataclass(frozen=True)
class StopTiming:
    """One run: seconds from the (first) signal to the harness's exit, and what it left."""

    exit_after_s: float
    exit_status: int
    reports: bool  # results.json and the JUnit report were written
    left_running: int  # processes the blocks noted that were still alive after the harness exited


def end_noted(work: Path) -> list[int]:
    """SIGKILL the processes the blocks noted in `work`/pids that are still alive; their pids."""
    pids = [int(word) for word in (work / "pids").read_text().split()] if (work / "pids").exists() else []
    left = [pid for pid in pids if alive(pid)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def run_once(
    situation: Situation, grace_s: float, work: Path, *, code_dir: Path = REPO, limit_s: float | None = None
) -> StopTiming:
    """One run of the harness whose `ci` package is in `code_dir`; CommandFailed if it never gets there.

    The harness gets `limit_s` (else grace + 120 s) after the signal to exit.
    """
    for stale in ("pids", "ready", "term", "junit.xml"):
        (work / stale).unlink(missing_ok=True)
    guide = work / "guide.md"
    guide.write_text(situation.guide(work), encoding="utf-8")
    env = dict(os.environ)
    if situation.fake_py_spy:
        fake = work / "py-spy"
        fake.write_text(HUNG_PY_SPY.format(dir=work), encoding="utf-8")
        fake.chmod(0o755)
        env["GUIDE_GUARD_PY_SPY"] = str(fake)
    out = work / f"out-{time.monotonic_ns()}"
    argv = [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out), "--junit", str(work / "junit.xml")]
    with open(work / "ci.log", "wb") as log:
        harness = subprocess.Popen(
            [*argv, "--grace", f"{grace_s:g}"], cwd=code_dir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    try:
        ready = work / situation.ready_file
        until = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().strip()):
            if time.monotonic() > until or harness.poll() is not None:
                raise CommandFailed(f"{situation.name}: the run never got there (see {work / 'ci.log'})")
            time.sleep(POLL_S)
        signalled = time.monotonic()
        for number, signum in enumerate(situation.signals):
            if number:
                time.sleep(SECOND_SIGNAL_AFTER_S)
            harness.send_signal(signum)
        code = harness.wait(timeout=grace_s + 120 if limit_s is None else limit_s)
        exited = time.monotonic()
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        left = end_noted(work)  # also when the run failed: the benchmark must not leave them either
    reports = (out / "results.json").exists() and (work / "junit.xml").exists()
    if reports and json.loads((out / "results.json").read_text(encoding="utf-8"))["exit_status"] != code:
        raise CommandFailed(f"{situation.name}: results.json does not say the exit status {code}")
    return StopTiming(exited - signalled, code, reports, len(left))


def run_signals(grace_s: float, repeat: int, section: Section) -> dict[str, list[StopTiming]]:
    timings: dict[str, list[StopTiming]] = {situation.name: [] for situation in SITUATIONS}
    with tempfile.TemporaryDirectory(prefix="gg-signals-") as tmp:

        def runner(situation: Situation) -> Callable[[int], float]:
            work = Path(tmp) / situation.name.replace(" ", "-").replace(",", "")
            work.mkdir()

            def run(_: int) -> float:
                timing = run_once(situation, grace_s, work)
                timings[situation.name].append(timing)
                return timing.exit_after_s

            return run

        interleaved({situation.name: runner(situation) for situation in SITUATIONS}, repeat)
    section.line(f"--grace {grace_s:g}; seconds from the signal to the harness's exit; median (worst) of {repeat}")
    header = (
        f"{'situation':>18} {'signal':>15} {'exit':>5} {'reports':>8} {'left':>5} {'signal -> exit':>16} {'target':>7}"
    )
    section.table(header)
    for situation in SITUATIONS:
        runs = timings[situation.name]
        times = [run.exit_after_s for run in runs]
        codes = sorted({run.exit_status for run in runs})
        reports = "all" if all(run.reports for run in runs) else "MISSING"
        left = max(run.left_running for run in runs)
        names = "+".join(signal.Signals(signum).name for signum in situation.signals)
        section.line(
            f"{situation.name:>18} {names:>15} {'/'.join(map(str, codes)):>5} {reports:>8} {left:>5}"
            f" {f'{median(times):.3f} ({max(times):.3f})':>16} {f'<= {TARGET_S:g}':>7}"
        )
        section.summary.append(
            SummaryRow(
                "signals",
                f"{names} during {situation.name} -> harness exited (grace {grace_s:g} s)",
                f"{median(times):.2f} s (worst {max(times):.2f} s)",
                f"exit {'/'.join(map(str, codes))}, reports {reports}, {left} left running",
                "",
                f"<= {TARGET_S:g} s",
                verdict(max(times) <= TARGET_S and reports == "all" and left == 0),
            )
        )
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--grace", type=float, default=10.0, help="--grace of the runs in seconds (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per situation (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.grace < 0:
        parser.error("--repeat must be at least 1 and --grace not negative")
    try:
        run_signals(args.grace, args.repeat, Section("Signals"))
    except (CommandFailed, OSError, subprocess.TimeoutExpired) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
