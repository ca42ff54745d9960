"""[simulation] The trainer's process group: it needs as many visible NPUs as trainer processes."""

from __future__ import annotations


def init_distributed(nproc_per_node: int) -> None:
    """Fail as the real trainer does when ASCEND_RT_VISIBLE_DEVICES leaves too few cards."""
    import torch
    import torch_npu  # noqa: F401  # registers torch.npu, as the real trainer needs it to

    cards = torch.npu.device_count()
    if cards < nproc_per_node:
        raise RuntimeError(f"deployment.trainer.nproc_per_node={nproc_per_node} but {cards} NPU(s) are visible")
    print(f"train: {nproc_per_node} trainer process(es) on {cards} visible NPU(s)", flush=True)
