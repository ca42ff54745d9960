"""REHEARSAL_BREAK=mooncake-stale-master: a mooncake_master that a previous run of the guide left on its ports."""

# On a real machine, a guide run that failed or was interrupted after smoke-start-mooncake leaves its
# master running: the next run's master cannot bind, while the old one still answers on the RPC port.
# With this knob the rehearsal makes that machine before ci.run starts: the Mooncake stand-in installed
# as the earlier run installed it, and its master started with the guide's own flags, so that its
# command line is the real one's. The guide must stop it; what became of it goes into the report.

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ci.rehearsal.model import BREAK_ENV, MOONCAKE_PORTS, Rehearsal, SetupError

__all__ = ["STALE_MASTER_KNOB", "StaleMaster", "start_stale_master", "stop_stale_master"]

STALE_MASTER_KNOB = "mooncake-stale-master"
_WHEEL = "mooncake-transfer-engine-npu==0.3.13.post1"  # what the guide's build-mooncake installs
_BIND_WAIT_S = 10.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class StaleMaster:
    """The master of the "previous run", started by the rehearsal itself."""

    process: subprocess.Popen[bytes]  # the console script's process, which the binary replaced (execv)
    log: Path  # its stdout and stderr


def _die_with_rehearsal() -> None:
    """In the stale master: SIGKILL when the rehearsal dies, so a killed rehearsal leaves no master behind."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def start_stale_master(plan: Rehearsal) -> StaleMaster | None:
    """With the knob: install the Mooncake stand-in and start its master on the guide's ports; else None.

    Call it before any thread is started (its child sets a parent-death signal). Raises SetupError when
    the master cannot be started.
    """
    if plan.env.get(BREAK_ENV) != STALE_MASTER_KNOB:
        return None
    sandbox = plan.sandbox
    install = subprocess.run(
        # into the guide's interpreter, a virtualenv's or a system one (REHEARSAL_BREAK=uv-no-venv)
        [str(sandbox.bin / "uv"), "pip", "install", "--quiet", "--python", str(sandbox.bin / "python"), _WHEEL],
        env=plan.env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if install.returncode != 0:
        raise SetupError(f"the previous run's Mooncake could not be installed: {install.stderr.strip()}")
    flags = [f"--{name}={port}" for name, port in MOONCAKE_PORTS.items()]
    command = ["mooncake_master", "--enable_http_metadata_server=true", *flags, "--enable_metric_reporting=false"]
    log = sandbox.base / "previous-run-mooncake.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(sandbox.python_env / "bin" / command[0]), *command[1:]],
            env=plan.env,
            cwd=sandbox.workdir,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a daemon left behind, in no group the rehearsal signals
            preexec_fn=_die_with_rehearsal,
        )
    stale = StaleMaster(process, log)
    deadline = time.monotonic() + _BIND_WAIT_S
    while not _accepts(MOONCAKE_PORTS["rpc_port"]):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_stale_master(stale)  # the rehearsal stops here: what became of it is in the error
            raise SetupError(f"the previous run's mooncake_master did not start: {log.read_text(errors='replace')}")
        time.sleep(0.05)
    plan.notes.append(
        f"previous run ({BREAK_ENV}={STALE_MASTER_KNOB}): mooncake_master pid {process.pid} started on ports "
        f"{', '.join(str(port) for port in MOONCAKE_PORTS.values())} before the guide ran (log {log})"
    )
    return stale


def stop_stale_master(stale: StaleMaster) -> tuple[str, bool]:
    """Reap the stale master, or end it if the guide did not: what became of it, and whether it outlived the run."""
    code = stale.process.poll()
    if code is None:
        stale.process.kill()
        stale.process.wait()
        pid = stale.process.pid
        return f"[ERROR] rehearsal: the previous run's mooncake_master (pid {pid}) outlived the guide; killed", True
    if code < 0:
        return f"  the guide stopped it during the run ({signal.Signals(-code).name})", False
    return f"  it exited during the run with status {code}", False
