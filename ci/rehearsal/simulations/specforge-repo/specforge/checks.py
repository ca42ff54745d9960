"""[simulation] What the stand-in trainer verifies before its step: model files, data, the servers it talks to."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any


def model_tensors(model_path: str) -> dict[str, list[int]]:
    """Tensor names and shapes in the model's safetensors headers (no weights are read)."""
    root = Path(model_path)
    if not (root / "config.json").is_file():
        raise FileNotFoundError(f"model.target_model_path {model_path!r} has no config.json")
    shapes: dict[str, list[int]] = {}
    for weights in sorted(root.glob("*.safetensors")):
        with open(weights, "rb") as handle:
            (header_bytes,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_bytes))
        shapes.update({name: entry["shape"] for name, entry in header.items() if name != "__metadata__"})
    if not shapes:
        raise FileNotFoundError(f"model.target_model_path {model_path!r} has no *.safetensors weights")
    return shapes


def text_config(model_path: str) -> dict[str, Any]:
    """The language model's settings: `text_config` of a multimodal config (Qwen3.5's layout), else the top level.

    transformers' Qwen3_5Config nests the text model's settings (hidden_size,
    vocab_size, layer_types, ...) under `text_config`, as get_text_config()
    resolves them for any model.
    """
    config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    nested = config.get("text_config")
    return nested if isinstance(nested, dict) else config


def conversations(data_path: str) -> list[dict[str, Any]]:
    """The JSONL rows, each with a user turn and an assistant turn."""
    path = Path(data_path)
    if not path.is_file():
        raise FileNotFoundError(f"data.train_data_path {data_path!r} does not exist")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"data.train_data_path {data_path!r} is empty")
    for row in rows:
        roles = [turn.get("role") for turn in row.get("conversations", [])]
        if "user" not in roles or "assistant" not in roles:
            raise ValueError(f"row {row.get('id')!r} needs a user and an assistant turn, has {roles}")
    return rows


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def connect_mooncake(address: str) -> socket.socket:
    """A connection to mooncake_master's RPC port, as the Mooncake store client opens one."""
    try:
        return socket.create_connection(split_address(address), timeout=5)
    except OSError as exc:
        raise RuntimeError(f"mooncake: Client not available: master {address} unreachable ({exc})") from exc
