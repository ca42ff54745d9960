"""[simulation] `specforge train`'s launch plan: checks the config, runs one producer/consumer step, exits."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import rehearsal_simulation
from rehearsal_simulation import broken, say

from specforge import application, checks, config, distributed, process_plan

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_SYS_EXIT = {"x86_64": 60, "aarch64": 93, "riscv64": 93}  # exit(2): ends the calling thread only
_LAUNCHER_WAIT_CAP_S = 600.0  # never outlive a forgotten launching shell by more than this


def run(config_path: str, role: str, overrides: tuple[str, ...], *, plan: bool) -> int:
    out = sys.stdout
    say("specforge train: guide-guard rehearsal stand-in (checks its inputs, runs no model)")
    launching_shell = os.getppid()
    _signal_when_parent_exits()
    try:
        cfg = config.load(config_path, overrides)
        rendered = process_plan.render(cfg, config_path, role, overrides)
    except config.ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    if plan:
        print(rendered)
        return 0
    rehearsal_simulation.register_process("specforge train")
    control_dir = _claim_control_dir(cfg)
    application.check_inputs(cfg)
    distributed.init_distributed(int(config.get(cfg, "deployment.trainer.nproc_per_node")))
    from accelerate.utils import set_seed  # the real _train() imports it lazily, as here

    set_seed(int(config.get(cfg, "training.seed")))
    master = config.get(cfg, "deployment.disaggregated.mooncake_master_server_addr")
    if broken("trainer-dies"):
        say("REHEARSAL_BREAK=trainer-dies: the trainer fails at start, as with no mooncake_master", out)
        raise RuntimeError(f"mooncake: Client not available: master {master} refused the connection")
    checks.connect_mooncake(master).close()
    application.produce(cfg)
    consumer = _start_consumer(cfg, control_dir)
    code = consumer.wait()
    if code != 0:
        raise RuntimeError(f"consumer worker pid {consumer.pid} exited with {code}")
    print(f"train: max_steps={config.get(cfg, 'training.max_steps')} reached; workers done", flush=True)
    _wait_for_launching_shell(launching_shell)
    if broken("trainer-zombie"):
        _leave_zombie_leader(master)
    return 0


def _signal_when_parent_exits() -> None:
    """SIGUSR1 when the launching shell exits; blocked here and collected by sigtimedwait."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)


def _wait_for_launching_shell(launching_shell: int) -> None:
    """The real trainer runs for minutes, so the guide's liveness check always finds it alive.

    This one finishes its step in a second; it stays until the shell that
    launched it (the guide's launch block) has exited, so the rehearsal checks
    the same thing without waiting for a real training run.
    """
    say("train: step done; exiting once the launching shell has exited", sys.stdout)
    if os.getppid() == launching_shell:
        signal.sigtimedwait({signal.SIGUSR1}, _LAUNCHER_WAIT_CAP_S)
    print("train: launching shell gone; exiting", flush=True)
    if not broken("trainer-zombie"):
        os._exit(0)  # at once: the monitor block starts right after the launch block


def _leave_zombie_leader(master: str) -> None:
    """REHEARSAL_BREAK=trainer-zombie: /proc/PID/status says Z while kill -0 still succeeds.

    The harness is a child subreaper and reaps exited orphans at once, so a
    truly unreaped zombie cannot last under it. The same observable state comes
    from ending only the main thread: the thread group leader turns Z, while a
    Mooncake client thread keeps the process until mooncake_master goes away
    (at the end of the run), then ends it.
    """
    connection = checks.connect_mooncake(master)

    def hold() -> None:
        connection.settimeout(_LAUNCHER_WAIT_CAP_S)
        with contextlib.suppress(OSError):
            connection.recv(1)  # b"" once mooncake_master has gone away
        say("trainer-zombie: mooncake_master went away; the last thread ends the process", sys.stdout)
        os._exit(0)

    threading.Thread(target=hold, name="mooncake-client", daemon=True).start()
    say("REHEARSAL_BREAK=trainer-zombie: main thread exits; the process stays as a zombie leader", sys.stdout)
    libc = ctypes.CDLL(None, use_errno=True)
    number = _SYS_EXIT.get(platform.machine())
    if number is None:
        libc.pthread_exit(None)
    libc.syscall(number, 0)


def _claim_control_dir(cfg: dict[str, Any]) -> Path:
    """The producer's claim on the run's control_dir (the guide's comment: a stale one stops the run)."""
    control_dir = Path(config.get(cfg, "deployment.disaggregated.control_dir"))
    claim = control_dir / "producer_claim"
    if claim.exists():
        output_dir = config.get(cfg, "output_dir")
        raise RuntimeError(f"_claim_fresh_control_path: {claim} is left from an earlier run; remove {output_dir}")
    control_dir.mkdir(parents=True, exist_ok=True)
    claim.write_text(f"{os.getpid()}\n", encoding="utf-8")
    return control_dir


def _start_consumer(cfg: dict[str, Any], control_dir: Path) -> subprocess.Popen[bytes]:
    resolved = control_dir / "resolved_config.json"
    resolved.write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    return subprocess.Popen([sys.executable, "-m", "specforge.worker", "--role", "consumer", str(resolved)])
