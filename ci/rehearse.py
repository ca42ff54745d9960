"""Rehearsal: run the SpecForge guide green on any Linux machine, against simulations of the NPU box it targets."""

# `python -m ci.rehearse docs/specforge.md [--output-dir DIR] [--ref tag|commit] [--dialect D] [ci.run flags]`
# moves into private network and mount namespaces where the machine allows it, builds a sandbox (fake
# tools first on PATH, a virtualenv holding the simulated image's Python packages, a local git repository
# standing in for SpecForge, the CANN files the guide reads), starts a fake Hugging Face Hub on 127.0.0.1
# for the real huggingface_hub client, runs `python -m ci.run` on the guide in that environment, and
# prints a report of every simulation and override in effect. Its exit status is ci.run's. With
# `--resume DIR` it reuses the sandbox of the rehearsal in DIR as that one left it, and its ci.run continues
# DIR's record (ci/rehearsal/resumed.py). The
# simulations and the modules that run them live in ci/rehearsal/; docs/rehearsal.md describes them,
# the overrides and the failure knobs.

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from ci import ALWAYS_STOP, KEEP_NEWEST, STOP_SIGNALS
from ci.cli import (
    ExitCode,
    add_dialect_options,
    command_parser,
    dialect_arguments,
    dialect_problem,
    fail,
    guarded_command,
    print_error,
)
from ci.rehearsal.model import ASSETS, BREAK_ENV, KNOBS

if TYPE_CHECKING:
    from ci.rehearsal.fake_hub import FakeHub
    from ci.rehearsal.model import Rehearsal

__all__ = ["ASSETS", "KNOBS", "build_parser", "main"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.rehearse",
        description="Run a guide against simulations of its NPU machine (no NPU, no network); "
        "other flags go to ci.run.",
        epilog=f"Failure knobs ({BREAK_ENV}=...): " + "; ".join(f"{k}: {v}" for k, v in KNOBS.items()),
    )
    parser.add_argument("guide", metavar="GUIDE", help="the guide to rehearse (docs/specforge.md)")
    parser.add_argument("--output-dir", metavar="DIR", help="sandbox, block outputs and results.json (kept)")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="no effect, kept for old command lines: a temporary directory is always kept now, until pruned",
    )
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument(
        "--real",
        dest="mode",
        action="store_const",
        const="real",
        help="run the real uv and the real Mooncake wheel's mooncake_master where they can be had here "
        "(each says why when it cannot; GUIDE_GUARD_REQUIRE_EXTERNAL=1 makes that an error)",
    )
    parts.add_argument(
        "--simulated",
        dest="mode",
        action="store_const",
        const="simulated",
        help="stand-ins only: seconds, offline, nothing from outside the checkout (the default)",
    )
    parser.set_defaults(mode="simulated")
    parser.add_argument(
        "--wheelhouse",
        metavar="DIR",
        help="--real: the wheels the guide installs (python -m ci.rehearsal.parts fetch DIR); "
        "default $GUIDE_GUARD_WHEELHOUSE",
    )
    parser.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the rehearsal kept in DIR (its --output-dir): reuse its sandbox as it was left (packages, "
        "model, clone) and run `ci.run --resume DIR`; the record goes to this one's --output-dir, DIR's stays as it is",
    )
    parser.add_argument(
        "--ref",
        choices=("tag", "commit"),
        default="tag",
        help="give UPSTREAM_REF as the stand-in's release tag (default) or its commit hash",
    )
    add_dialect_options(parser)  # passed on to ci.run, checked before the sandbox is built
    return parser


def _usage_problem(args: argparse.Namespace, passed_on: Sequence[str]) -> str | None:
    """What is wrong with the command line or the failure knob, if anything."""
    guide = args.guide
    dialect = dialect_problem(args.dialect)
    if dialect is not None:
        return dialect
    if args.wheelhouse is not None and args.mode != "real":
        return "--wheelhouse is for --real: the stand-ins need no wheels"
    if any(arg == "--workdir" or arg.startswith("--workdir=") for arg in passed_on):
        return "--workdir is the rehearsal's: every block runs in the sandbox"
    if args.resume is not None and args.mode == "real":
        return "--resume continues --simulated rehearsals only: a --real one's real parts are set up per rehearsal"
    knob = os.environ.get(BREAK_ENV, "")
    if knob and knob not in KNOBS:
        return f"{BREAK_ENV}={knob!r} is not a failure knob; known: {', '.join(KNOBS)}"
    if not Path(guide).is_file():
        return f"no guide at {guide}"
    return None


def _end_with_parent() -> None:
    """In ci.run's process: SIGTERM if the rehearsal dies, so it ends its blocks even after a SIGKILL of ours."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class _Forwarder:
    """Passes a stop signal (SIGINT, SIGTERM, SIGQUIT...) on to ci.run, which ends its blocks and writes its reports."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(OSError):
                self.child.send_signal(signum)


@contextlib.contextmanager
def _forwarding_signals() -> Iterator[_Forwarder]:
    forwarder = _Forwarder()
    # every signal that stops ci.run (a run's own: it ends its blocks and writes its reports)
    taken = [signum for signum in STOP_SIGNALS if signum in ALWAYS_STOP or signal.getsignal(signum) != signal.SIG_IGN]
    previous = {signum: signal.signal(signum, forwarder) for signum in taken}
    try:
        yield forwarder
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@guarded_command()
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, passed_on = parser.parse_known_args(argv)
    problem = _usage_problem(args, passed_on)
    if problem is not None:
        return fail(problem, parser)
    if not sys.platform.startswith("linux"):
        print_error("rehearsal: it runs on Linux only (it reads /proc, as the guide does)")
        return ExitCode.USAGE

    # The rehearsal's machinery (an HTTP server, namespaces, the sandbox) is imported only for a
    # rehearsal, so that `--help` and usage errors stay quick.
    from ci.rehearsal.fake_hub import FakeHub, hub_repositories
    from ci.rehearsal.model import SetupError
    from ci.rehearsal.namespaces import scratch_files
    from ci.rehearsal.report import render
    from ci.rehearsal.resumed import find_earlier
    from ci.rehearsal.sandbox import set_up

    scratch = scratch_files(Path(args.guide).read_text(encoding="utf-8"))
    try:
        knob = os.environ.get(BREAK_ENV, "")
        earlier = None
        if args.resume is not None:
            earlier = find_earlier(args.resume, output_dir=args.output_dir, mode=args.mode, knob=knob)
        plan = set_up(
            args.output_dir,
            ref_kind=args.ref,
            scratch=scratch,
            mode=args.mode,
            wheelhouse=args.wheelhouse,
            earlier=earlier,
        )
    except SetupError as exc:
        print_error(f"rehearsal: {exc}")
        return ExitCode.USAGE

    stalls_on = "model.safetensors" if knob == "net-stall" else ""
    hub = FakeHub(hub_repositories(), plan.own_files / "hub.log", stalls_on=stalls_on)
    plan.override("HF_ENDPOINT", hub.url, "the fake Hub serves the model")
    command = [sys.executable, "-m", "ci.run", args.guide, "--output-dir", str(plan.sandbox.root)]
    command += ["--workdir", str(plan.sandbox.workdir)]
    command += ["--resume", str(plan.resumed)] if plan.resumed is not None else []
    command += dialect_arguments(args.dialect, args.timeout_rules)
    print(f"rehearsal: {args.guide} against simulations; sandbox {plan.sandbox.base}", flush=True)
    exit_status, leftovers = _run(plan, [*command, *passed_on], hub)
    text = render(plan, args.guide, hub, int(exit_status), leftovers)
    _write_new(plan.own_files / "rehearsal-report.txt", text + "\n")
    print(text, flush=True)
    # kept, even after a passing run: every path printed above stays good (a temporary one goes when pruned)
    where = (
        ""
        if args.output_dir
        else f" (a temporary directory: kept while among the {KEEP_NEWEST} newest, or changed within the hour)"
    )
    if plan.resumed is None:
        print(f"rehearsal: outputs and sandbox kept in {plan.sandbox.root}{where}", flush=True)
    else:
        reused = f"the sandbox it reused is {plan.sandbox.base}"
        print(f"rehearsal: outputs kept in {plan.sandbox.root}{where}; {reused}", flush=True)
    return exit_status


def _write_new(path: Path, text: str) -> None:
    """PATH holds TEXT, in a new file: written beside it under a name of its own, which then takes PATH's name in
    one rename (a link at PATH is replaced, never followed; the mode is the umask's)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _run(plan: Rehearsal, command: list[str], hub: FakeHub) -> tuple[int, dict[int, str]]:
    """ci.run's exit status (FAILED if a simulated process outlived a passing run), and what outlived it."""
    from ci.rehearsal.model import SetupError
    from ci.rehearsal.previous_run import start_stale_master, stop_stale_master
    from ci.rehearsal.sweep import sweep

    exit_status: int = ExitCode.USAGE
    stale = None
    outlived = False
    try:
        with _forwarding_signals() as forwarder:
            # both started before the Hub's thread: preexec_fn is safe while this process has one thread
            stale = start_stale_master(plan)
            forwarder.child = subprocess.Popen(
                command, env=plan.env, stdin=subprocess.DEVNULL, preexec_fn=_end_with_parent
            )
            hub.start()  # long before the guide's download block
            exit_status = forwarder.child.wait()
    except SetupError as exc:
        print_error(f"rehearsal: {exc}")
    finally:
        hub.stop()
        if stale is not None:
            note, outlived = stop_stale_master(stale)
            plan.notes.append(note)
        leftovers = sweep(plan.sandbox)
    if (leftovers or outlived) and exit_status == ExitCode.OK:
        exit_status = ExitCode.FAILED  # the run passed, but left a simulated process behind
    return exit_status, leftovers


if __name__ == "__main__":
    sys.exit(main())
