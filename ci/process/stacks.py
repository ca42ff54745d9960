"""Stack dumps of a timed-out block's Python processes and of those earlier blocks left running (py-spy), and whether
this machine allows them."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base import lazy_import
from ci.base.files import make_directories, os_error_text, write_atomically
from ci.base.signals import signal_name

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_import("psutil")

__all__ = ["PY_SPY_ENV", "dump_python_stacks", "ptrace_refusal", "stack_dump_problem"]

PY_SPY_ENV = "GUIDE_GUARD_PY_SPY"  # path of the py-spy to use, when not the one installed with the harness

_DUMP_TIMEOUT_S = 15.0  # per py-spy call
_DUMP_BUDGET_S = 45.0  # for all dumps of one timeout, so a hung dump never delays the kill much
_OUTPUT_POLL_S = 0.05  # how often a short helper command (py-spy) is checked for a stop request
_TRIAL_DUMP_TIMEOUT_S = 5.0
_BACKGROUND_NOTED = 10  # processes earlier blocks left running that are not dumped, named one by one; the rest counted
_CAP_SYS_PTRACE = 19  # from <linux/capability.h>
_VFS_CAP_FLAGS_EFFECTIVE = 0x1  # from <linux/capability.h>: a file capability raised at exec
_PERMISSION_WORDS = re.compile(r"permission denied|operation not permitted|EPERM|EACCES|SYS_PTRACE", re.IGNORECASE)
_FIX_CAPABILITY = (
    "add --cap-add SYS_PTRACE to the job container's options (docs/runners.md), or give the harness CAP_SYS_PTRACE"
)


def _is_python(proc: psutil.Process) -> bool:
    """Whether PROC is a live Python process (by its name or its program's), which py-spy can dump."""
    with contextlib.suppress(psutil.Error):
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        name = proc.name().lower()
        cmdline = " ".join(proc.cmdline()[:1]).lower()
        return "python" in name or "python" in os.path.basename(cmdline)
    return False


def _command(proc: psutil.Process) -> str:
    """PROC's command line on one line, cut to 80 characters, for a note."""
    with contextlib.suppress(psutil.Error):
        command = " ".join(" ".join(proc.cmdline()).split()) or proc.name()
        return command if len(command) <= 80 else command[:80] + " ..."
    return "?"


def dump_python_stacks(
    members: Iterable[psutil.Process],
    dump_dir: Path,
    stop_requested: Callable[[], int | None],
    *,
    within: Path,
    left_by: Mapping[psutil.Process, str] | None = None,
) -> tuple[list[str], list[str]]:
    """py-spy dumps of every Python process among `members` (a block's tree); (paths, one-line notes).

    LEFT_BY holds the processes earlier blocks left running (a server the
    timed-out block may have been waiting on), each with the block it came
    from: its Python ones are dumped too, after the block's own, and the notes
    say so; the notes name each of the others, and why it was not dumped.
    They are written in DUMP_DIR under WITHIN (the output directory), as new files (ci.base.files).

    Skipped, or cut short, when a stop signal comes: the run must end within 2 s of it.
    """
    paths: list[str] = []
    notes: list[str] = []
    left_by = left_by or {}
    pythons = [proc for proc in members if _is_python(proc)]
    background = [proc for proc in left_by if _is_python(proc)]
    others = [proc for proc in left_by if proc not in background]
    not_python = [
        f"pid {proc.pid} ({_command(proc)}), left running by block {left_by[proc]}, not dumped:"
        " not a Python process (py-spy dumps Python only)"
        for proc in others[:_BACKGROUND_NOTED]
    ]
    if len(others) > _BACKGROUND_NOTED:
        not_python.append(
            f"and {len(others) - _BACKGROUND_NOTED} more processes left running by earlier blocks, not Python, not dumped"
        )
    if not pythons and not background:
        return paths, not_python
    py_spy = _find_py_spy()
    if py_spy is None:
        notes.append("stack dump skipped: py-spy is not installed (pip install py-spy)")
        return paths, notes + not_python
    try:
        make_directories(dump_dir, within=within)
    except OSError as exc:  # a full disk, say: the run goes on without them
        notes.append(f"stack dumps not taken: cannot make {dump_dir} ({os_error_text(exc, dump_dir)})")
        return paths, notes + not_python
    budget_end = time.monotonic() + _DUMP_BUDGET_S
    for proc in [*pythons, *background]:
        origin = f" (left running by block {left_by[proc]})" if proc in left_by else ""
        signum = stop_requested()
        if signum is not None:
            notes.append(
                f"stack dump of pid {proc.pid}{origin} skipped: the run was interrupted by {signal_name(signum)}"
            )
            continue
        left_s = budget_end - time.monotonic()
        if left_s <= 1:
            notes.append(f"stack dump of pid {proc.pid}{origin} skipped: dump time budget used up")
            continue
        text, note = _py_spy_dump(py_spy, proc.pid, min(_DUMP_TIMEOUT_S, left_s), stop_requested)
        if text is None:
            notes.append(f"stack dump of pid {proc.pid}{origin} failed: {note}")
            continue
        path = dump_dir / f"pid-{proc.pid}.txt"
        try:
            write_atomically(path, text, within=within)  # on a full disk: no file rather than a part of one
        except OSError as exc:
            notes.append(
                f"stack dump of pid {proc.pid}{origin} not kept: cannot write {path} ({os_error_text(exc, path)})"
            )
            continue
        paths.append(str(path))
        if origin:
            notes.append(
                f"stack dump of pid {proc.pid}{origin} taken too, in {path.name}: this block may have waited on it"
            )
    return paths, notes + not_python


def stack_dump_problem(stop_requested: Callable[[], int | None]) -> str | None:
    """Why stack dumps on timeout would be missing in this run (what is wrong, then the fix), or None.

    `stop_requested` gives the stop signal's number once one came (a trial
    dump is cut short then).

    Runs at the start of every run, so it must be cheap. The kernel's own
    rules are read from /proc (0.15 ms, measured): Yama's ptrace_scope,
    and whether the harness (or py-spy itself) holds CAP_SYS_PTRACE; they
    decide the common cases, a container without --cap-add SYS_PTRACE on
    a host with ptrace_scope 1 or more among them. What /proc cannot tell
    is whether a seccomp filter refuses ptrace where those rules allow it
    (Docker's default profile does on kernels before 4.8; custom profiles
    may): only under a filter is a trial `py-spy dump` of the harness
    itself taken. It costs about 20 ms (measured on 2 cores), over a
    tenth of a short run's fixed cost, which the overhead benchmark's
    target could not absorb on every run; inside a container, where a
    filter is the rule, a night's run takes hours.
    """
    py_spy = _find_py_spy()
    if py_spy is None:
        return "py-spy is not installed. Fix: install it beside the harness (pip install py-spy)"
    if not (os.path.isfile(py_spy) and os.access(py_spy, os.X_OK)):
        return f"{PY_SPY_ENV} names {py_spy}, which is not an executable file. Fix: point it at py-spy, or unset it"
    status = _proc_status()
    try:
        file_caps: bytes | None = os.getxattr(py_spy, "security.capability")
    except OSError:  # none set (the usual case), or no extended attributes here
        file_caps = None
    refusal = ptrace_refusal(
        _read_int("/proc/sys/kernel/yama/ptrace_scope"),
        int(status.get("CapEff", "0"), 16),
        int(status.get("CapBnd", "0"), 16),
        file_caps,
    )
    if refusal is not None or status.get("Seccomp", "0") != "2":
        return refusal
    return _trial_dump(py_spy, stop_requested)


def _trial_dump(py_spy: str, stop_requested: Callable[[], int | None]) -> str | None:
    """Dump the harness's own stack as a block's would be; why that was refused, or None."""
    done = _run_bounded([py_spy, "dump", "--pid", str(os.getpid())], _TRIAL_DUMP_TIMEOUT_S, stop_requested)
    if isinstance(done, str):
        if stop_requested() is not None:
            return None  # the run stops anyway; nothing to warn about
        return f"a trial py-spy dump {done}. Fix: check that `py-spy dump --pid PID` works here"
    said = _py_spy_said(done.stderr or done.stdout)
    if done.returncode != 0 and _PERMISSION_WORDS.search((done.stderr or done.stdout).decode("utf-8", "replace")):
        return f"py-spy may not attach to processes here (a trial dump said: {said}). Fix: {_FIX_CAPABILITY}"
    # Any other failure (a Python version this py-spy does not know, say) is about the
    # harness's interpreter, not the blocks' processes: no warning.
    return None


def _find_py_spy() -> str | None:
    chosen = os.environ.get(PY_SPY_ENV)
    if chosen:
        return chosen
    beside = Path(sys.executable).parent / "py-spy"
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def _run_bounded(
    argv: Sequence[str], timeout_s: float, stop_requested: Callable[[], int | None]
) -> subprocess.CompletedProcess[bytes] | str:
    """Run a short helper command (py-spy), its output captured; what it did, or why it was cut short.

    It is killed at the time limit, and as soon as a stop signal comes: a hung
    py-spy must not hold the run past the 2 s a stop may take.
    """
    try:
        child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return str(exc)
    end = time.monotonic() + timeout_s
    with child:
        while True:
            signum = stop_requested()
            if signum is not None:
                why = f"was cut short: the run was interrupted by {signal_name(signum)}"
                break
            left_s = end - time.monotonic()
            if left_s <= 0:
                why = f"did not answer in {timeout_s:.0f}s"
                break
            try:
                out, err = child.communicate(timeout=min(left_s, _OUTPUT_POLL_S))
            except subprocess.TimeoutExpired:
                continue  # communicate() keeps what was read so far for the next call
            return subprocess.CompletedProcess(list(argv), child.returncode, out, err)
        child.kill()
        child.communicate()
    return why


def _py_spy_said(output: bytes) -> str:
    """py-spy's error in one line: its first line, and the innermost cause when it lists them."""
    # RUST_BACKTRACE=1 (set on some machines) appends a backtrace of py-spy itself: of no use to a reader
    text = output.decode("utf-8", "replace").split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if "Caused by:" in lines and lines[-1] != "Caused by:":
        return f"{lines[0]} ({re.sub(r'^[0-9]+: ', '', lines[-1])})"
    return lines[0]


def _py_spy_dump(
    py_spy: str, pid: int, timeout_s: float, stop_requested: Callable[[], int | None]
) -> tuple[str | None, str]:
    """Run `py-spy dump`, with --native first; return (text, why it failed)."""
    last_error = ""
    for extra in (["--native"], []):
        done = _run_bounded([py_spy, "dump", "--pid", str(pid), *extra], timeout_s, stop_requested)
        if isinstance(done, str):
            return None, f"py-spy {done}"
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.decode("utf-8", "replace"), ""
        last_error = _py_spy_said(done.stderr or done.stdout) or f"exit {done.returncode}"
    return None, last_error


def _proc_status() -> dict[str, str]:
    """The fields of /proc/self/status (CapEff, CapBnd, Seccomp, ...); empty where there is no /proc."""
    fields = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
    except OSError:
        pass
    return fields


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def ptrace_refusal(ptrace_scope: int | None, cap_eff: int, cap_bnd: int, py_spy_file_caps: bytes | None) -> str | None:
    """Why the kernel's rules keep py-spy, started by the harness, from attaching to a block's processes.

    `ptrace_scope` is Yama's setting (None without Yama: then the classic
    rule, same user, applies, which blocks started by the harness meet);
    `cap_eff` and `cap_bnd` the harness's effective and bounding capability
    masks; `py_spy_file_caps` py-spy's `security.capability` attribute, if
    set. py-spy is the blocks' sibling, never their ancestor, so with
    ptrace_scope 1 or 2 only CAP_SYS_PTRACE lets it attach; with 3 nothing does.
    None when the rules allow it.
    """
    if ptrace_scope == 3:
        return (
            "kernel.yama.ptrace_scope is 3 on this host: no process may attach to another."
            " Fix: the host must boot with kernel.yama.ptrace_scope at 1 or lower, and the container get --cap-add SYS_PTRACE"
        )
    if ptrace_scope not in (1, 2) or cap_eff >> _CAP_SYS_PTRACE & 1:
        return None
    if py_spy_file_caps is not None and len(py_spy_file_caps) >= 8:
        # struct vfs_cap_data: magic_etc, then the low 32 bits of the permitted set (little-endian)
        magic_etc, permitted = struct.unpack_from("<II", py_spy_file_caps)
        raised_at_exec = magic_etc & _VFS_CAP_FLAGS_EFFECTIVE and permitted >> _CAP_SYS_PTRACE & 1
        if raised_at_exec and cap_bnd >> _CAP_SYS_PTRACE & 1:
            return None
    return (
        f"the harness lacks CAP_SYS_PTRACE and kernel.yama.ptrace_scope is {ptrace_scope},"
        f" so py-spy may not attach to a block's processes. Fix: {_FIX_CAPABILITY}"
    )
