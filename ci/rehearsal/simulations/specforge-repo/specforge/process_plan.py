"""[simulation] `specforge train --plan`: the resolved process plan as JSON, without starting anything.

The shape is the real one's (`LaunchPlan.render` and `build_launch_plan` in `specforge/launch_plan.py`,
SpecForge 0ae3171e): a JSON object, indented by 2 with sorted keys, holding `kind` (worker, command,
supervisor), `role`, `commands` (each with `label`, `argv`, `env`) and `worker_env`. The online
disaggregated environment names (DISAGG_*, MOONCAKE_*) are those that version sets; the managed-local
and windowed-fanout plans are not simulated.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from specforge import config

_MOONCAKE_ENV = {
    "MOONCAKE_METADATA_SERVER": "mooncake_metadata_server",
    "MOONCAKE_MASTER_SERVER_ADDR": "mooncake_master_server_addr",
    "MOONCAKE_PROTOCOL": "mooncake_protocol",
}


def resolve_role(cfg: dict[str, Any], requested: str) -> str:
    """auto: both (producer and consumer) for a disaggregated run, all otherwise."""
    disaggregated = cfg["deployment"]["mode"] == "disaggregated"
    role = ("both" if disaggregated else "all") if requested == "auto" else requested
    if disaggregated and role == "all":
        raise config.ConfigError("disaggregated training does not support --role all")
    if not disaggregated and role != "all":
        raise config.ConfigError("--role producer/consumer/both needs deployment.mode=disaggregated")
    return role


def role_env(cfg: dict[str, Any]) -> dict[str, str]:
    """What an online disaggregated producer or consumer is started with (the environment's MOONCAKE_* win)."""
    deployment = cfg["deployment"]["disaggregated"]
    if deployment is None:
        return {}
    control_dir = Path(deployment["control_dir"])
    state_dir = Path(deployment["consumer_state_dir"] or control_dir)
    inbox_root = control_dir if cfg["deployment"]["trainer"]["nnodes"] > 1 else state_dir
    env = {
        "DISAGG_BACKEND": deployment["backend"],
        "DISAGG_STORE_ID": deployment["store_id"] or cfg["run_id"],
        "DISAGG_CLIENT_SEGMENT_SIZE": "0",  # online: the capture server owns the feature objects
        "DISAGG_REF_CHANNEL": str(control_dir / "refs.jsonl"),
        "DISAGG_DB": str(state_dir / "consumer.sqlite"),
        "DISAGG_INBOX_DIR": str(inbox_root / "inboxes"),
    }
    if deployment["backend"] == "mooncake":
        env["DISAGG_CLIENT_BUFFER_SIZE"] = str(deployment["client_buffer_size"])
    for name, field in _MOONCAKE_ENV.items():
        value = os.environ.get(name, deployment[field])
        if value is not None:
            env[name] = str(value)
    return env


def _command(label: str, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    return {"label": label, "argv": argv, "env": dict(sorted(env.items()))}


def _trainer_argv(cfg: dict[str, Any], worker: list[str]) -> list[str]:
    """One process: the worker itself; more: torchrun running the CLI module on each."""
    nproc = cfg["deployment"]["trainer"]["nproc_per_node"]
    if cfg["deployment"]["trainer"]["nnodes"] * nproc == 1:
        return worker
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    return [*torchrun, "--module", "specforge.cli", *worker[3:]]


def render(cfg: dict[str, Any], config_path: str, requested_role: str, overrides: tuple[str, ...]) -> str:
    """The plan of a single-node run, as `specforge train --plan` prints it."""
    role = resolve_role(cfg, requested_role)
    env = role_env(cfg)

    def worker(worker_role: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "specforge.cli",
            "train",
            "--config",
            config_path,
            "--role",
            worker_role,
            *overrides,
        ]

    payload: dict[str, Any] = {"kind": "worker", "role": role, "commands": [], "worker_env": env}
    if role == "both":
        consumer = _trainer_argv(cfg, worker("consumer"))
        commands = [_command("producer", worker("producer"), env), _command("consumer", consumer, env)]
        payload.update(kind="supervisor", commands=commands, worker_env={})
    elif role != "producer" and _trainer_argv(cfg, worker(role)) != worker(role):
        payload.update(kind="command", commands=[_command(role, _trainer_argv(cfg, worker(role)), env)], worker_env={})
    return json.dumps(payload, indent=2, sort_keys=True)
