"""What the rehearsal stands in for: every simulation, how, and which of its behaviour was invented for the guide."""

# docs/rehearsal.md says, for each behaviour listed here, whether it was read from the real package (and
# from which version or commit) or written from the guide. The `invented` text is what the report prints
# under "invented for the guide": a real run can fail there while the rehearsal passes.

from __future__ import annotations

import platform

from ci.rehearsal.model import UPSTREAM_URL, Sandbox, Simulation
from ci.rehearsal.parts import Parts

__all__ = ["simulations"]


_TOOLS = Simulation(
    "npu-smi, apt-get",
    "the driver's CLI, the system package manager",
    "fake tools that record calls",
    "npu-smi prints the guide's sample table; apt-get installs nothing and never fails",
)
_UV = Simulation(
    "uv",
    "uv pip install",
    "fake: builds each wheel with its own PEP 517 backend, offline, into the venv",
    "only the stand-ins of the simulated index can be installed, and no dependency is ever resolved",
)
_PKILL = Simulation(
    "pkill",
    "pkill",
    "fake: signals only processes carrying this rehearsal's sandbox marker",
    "only the rehearsal's own processes are candidates (a real pkill may reach others)",
)
_TORCH = Simulation(
    "torch 2.10.0+cpu, torch_npu 2.10.0",
    "the image's PyTorch",
    "packages: 4 simulated 910B4 NPUs",
    "no kernel, HCCL or NPU memory exists: only is_available and device_count",
)
_SGLANG = Simulation(
    "sglang 0.5.18",
    "the image's editable sglang",
    "package; launch_server serves /health on loopback and reaches Mooncake at the first capture",
    "what the spec-capture patch adds and checks (the --chunked-prefill-size -1 ValueError, the MOONCAKE_* "
    "variables, libatb.so for a hybrid model), healthy one second after start, and Mooncake's refusal of the "
    "wildcard segment on an Ascend host (the message is upstream's, the status -1 and the log lines are not); "
    "the start-up death of REHEARSAL_BREAK=sglang-dies-starting (its log lines and error)",
)
_MOONCAKE = Simulation(
    "mooncake-transfer-engine-npu 0.3.13.post1",
    "Mooncake's NPU wheel",
    "stand-in installed by uv; mooncake_master execs the program in site-packages/mooncake, which binds "
    "its HTTP metadata, admin (metrics) and RPC ports and logs as the real binary was seen to",
    "it listens on 127.0.0.1 only, unless the rehearsal has its private network namespace (then 0.0.0.0, as "
    "the real one); its HTTP services answer only what the stand-ins ask; mooncake.store moves no data, and "
    "under cuda-wheel and apt-missing-lib raises the loader's ImportError from Python, not from a shared object",
)
_ACCELERATE = Simulation(
    "accelerate",
    "accelerate from PyPI",
    "stand-in installed by uv (set_seed only)",
    "nothing of accelerate but accelerate.utils.set_seed exists",
)
_SPECFORGE_INVENTED = (
    "what the base patch changes (two stand-in files, not sglang's 14) and the apply script beyond what issue 37 "
    "read of it (its default and refused targets, git apply -p2 --directory, the reverse check), the Ascend "
    "companion patch's content (a patch of the stand-in's own sink) and its malformed form (a hunk header "
    "claiming three lines too many), the silent skip's mechanism (git apply inside the work tree's python/ "
    "directory skips every path), the recipe's path (SpecForge keeps its NPU recipe under examples/configs/) and "
    "model.sglang_attention_backend, the receive_buffers and producer_claim failures, one step in a second; "
    "deployment.disaggregated.receive_buffers, which the guide overrides, is in SpecForge's schema only "
    "after 0ae3171e (read in a copy whose commit was not identified)"
)
_MODEL = Simulation(
    "Qwen/Qwen3.5-4B",
    "the Hugging Face Hub",
    "fake Hub on 127.0.0.1 for the real huggingface_hub client; a few-byte model",
    "the model's files: a config in Qwen3.5's layout with a tiny text model, one 232-byte tensor; the progress "
    "lines the client writes to fd 1 under store-polluted; under net-stall the Hub sends nothing at all",
)


def simulations(sandbox: Sandbox, parts: Parts) -> list[Simulation]:
    """The simulations a rehearsal in this sandbox runs with, in the order the report lists them.

    A part that runs real (parts) is not one of them: the report lists it under the real parts.
    """
    python = platform.python_version()
    version_answer = "" if python.startswith("3.11.") else f"`python --version` says 3.11 while Python {python} runs"
    kind = "a system Python (no virtualenv)" if sandbox.system_python else "a virtualenv"
    return [
        _TOOLS,
        *([] if parts.uv.real else [_UV]),
        _PKILL,
        Simulation("python", "the image's Python 3.11", f"{kind} in the sandbox, Python {python}", version_answer),
        _TORCH,
        _SGLANG,
        *([] if parts.mooncake.real else [_MOONCAKE]),
        _ACCELERATE,
        Simulation(
            "SpecForge",
            UPSTREAM_URL,
            f"local repository {sandbox.bare_repo} via git's url.insteadOf, no fake git",
            _SPECFORGE_INVENTED,
        ),
        _MODEL,
        Simulation(
            "CANN 9.0.0, ATB",
            "/usr/local/Ascend",
            f"files under {sandbox.ascend_root}",
            "libatb.so is a placeholder file, not a library",
        ),
    ]
