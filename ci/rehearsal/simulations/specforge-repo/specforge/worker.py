"""[simulation] A trainer worker (`--role consumer`): fetches captured features, logs one step, exits."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import rehearsal_simulation
from rehearsal_simulation import broken, say

from specforge import checks, config


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m specforge.worker")
    parser.add_argument("--role", required=True)
    parser.add_argument("config_path")
    args = parser.parse_args(argv)
    role, config_path = args.role, args.config_path
    rehearsal_simulation.register_process(f"specforge {role}")
    with open(config_path, encoding="utf-8") as handle:
        cfg = json.load(handle)
    buffers = config.get(cfg, "deployment.disaggregated.receive_buffers")
    master = config.get(cfg, "deployment.disaggregated.mooncake_master_server_addr")
    print(f"{role}: fetching features from mooncake {master} (receive_buffers={buffers})", flush=True)
    if buffers == "pinned":  # torch.cuda.is_available() is False on an NPU: no pinned host memory
        raise RuntimeError("ReceiveBufferPool._new_slot: register_buffer returned -600 for a pageable host buffer")
    checks.connect_mooncake(master).close()
    if broken("trainer-no-step"):
        say("REHEARSAL_BREAK=trainer-no-step: no feature batch ever arrives", sys.stdout)
        while True:
            print(f"{role}: waiting for the first feature batch", flush=True)
            time.sleep(2)
    loss = round(random.uniform(2.0, 4.0), 4)
    learning_rate = config.get(cfg, "training.learning_rate")
    anchors = config.get(cfg, "training.num_anchors")
    print(f"step 1: {{'loss': {loss}, 'lr': {learning_rate}, 'num_anchors': {anchors}}}", flush=True)
    if broken("trainer-hang"):
        say("REHEARSAL_BREAK=trainer-hang: the worker never returns from teardown", sys.stdout)
        while True:
            time.sleep(60)
    print(f"{role}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
