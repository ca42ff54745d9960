"""[simulation] Run configs: a YAML or JSON file plus dotted `section.field=value` overrides, checked against a schema.

The schema is a part of SpecForge's typed run config (`specforge/config/schema.py`): the sections, field
names and defaults of the fields the recipe and docs/specforge.md use, read at SpecForge 0ae3171e and in a
later copy whose commit was not identified (it adds `deployment.disaggregated.receive_buffers`, default
`pinned`). As in the real one, a key that is not a field fails, in the file and in an override, and an
override may set any field of the schema, whether the file sets it or not.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

REQUIRED = object()  # a field without a default
_ABSENT = object()  # a path the config does not have
SCHEMA: dict[str, Any] = {
    "model": {
        "target_model_path": REQUIRED,
        "draft_model_config": None,
        "target_backend": "sglang",
        "trust_remote_code": False,
        "embedding_key": "model.embed_tokens.weight",
        "torch_dtype": "bfloat16",
        "use_liger_kernel": False,
        "sglang_attention_backend": None,  # what the NPU recipes set to `ascend` (issue 37)
    },
    "data": {
        "train_data_path": "",
        "max_length": 2048,
        "chat_template": "llama3",
        "build_dataset_num_proc": 8,
        "cache_dir": "./cache",
    },
    "training": {
        "strategy": "eagle3",
        "num_epochs": 1,
        "max_steps": None,
        "batch_size": 1,
        "accumulation_steps": 1,
        "learning_rate": 1e-4,
        "warmup_ratio": 0.015,
        "max_grad_norm": 0.5,
        "attention_backend": "flex_attention",
        "num_anchors": 512,
        "loss_decay_gamma": None,
        "save_interval": 0,
        "log_interval": 50,
        "dist_timeout": 10,
        "seed": 42,
    },
    "tracking": {"report_to": "none"},
    "deployment": {
        "mode": "local_colocated",
        "trainer": {"nnodes": 1, "nproc_per_node": 1},
        "disaggregated": {
            "control_dir": REQUIRED,
            "consumer_state_dir": None,
            "backend": REQUIRED,
            "store_id": None,
            "server_urls": [],
            "mooncake_metadata_server": None,
            "mooncake_master_server_addr": None,
            "mooncake_protocol": None,
            "client_buffer_size": 256 << 20,
            "receive_buffers": "pinned",
            "shutdown_grace_s": 30.0,
        },
    },
    "run_id": "specforge-run",
    "output_dir": "./output",
}
CHOICES = {  # the Literal fields among them
    "model.target_backend": ("sglang",),
    "tracking.report_to": ("none", "wandb", "tensorboard", "swanlab", "mlflow"),
    "deployment.mode": ("local_colocated", "disaggregated"),
    "deployment.disaggregated.backend": ("shared_dir", "mooncake"),
    "deployment.disaggregated.receive_buffers": ("pageable", "pinned", "cuda"),
}
POSITIVE = {  # the integer fields that must be > 0 (gt=0); save_interval may be 0 (ge=0)
    "data.max_length",
    "training.max_steps",
    "training.batch_size",
    "training.accumulation_steps",
    "training.num_anchors",
    "training.log_interval",
    "deployment.trainer.nproc_per_node",
}


class ConfigError(ValueError):
    """The config file or an override does not fit the run config's schema."""


def _complete(raw: Any, schema: dict[str, Any], where: str) -> dict[str, Any]:
    """raw with every default filled in; a key that is not a field, or a missing required field, fails."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where or 'the config'} must be a mapping")
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        raise ConfigError(f"{where or 'the config'}: not a field of the run config: {', '.join(unknown)}")
    complete: dict[str, Any] = {}
    for name, default in schema.items():
        dotted = f"{where}.{name}" if where else name
        if isinstance(default, dict) and name == "disaggregated" and raw.get(name) is None:
            complete[name] = None  # deployment.disaggregated is optional: None unless given
        elif isinstance(default, dict):
            complete[name] = _complete(raw.get(name, {}), default, dotted)
        elif name in raw:
            complete[name] = raw[name]
        elif default is REQUIRED:
            raise ConfigError(f"{dotted} is required")
        else:
            complete[name] = copy.deepcopy(default)
    return complete


def _check_values(config: dict[str, Any]) -> None:
    for dotted, allowed in CHOICES.items():
        value = _value(config, dotted)
        if value is not _ABSENT and value not in allowed:
            raise ConfigError(f"{dotted}={value!r}: must be one of {', '.join(allowed)}")
    for dotted in POSITIVE:
        value = _value(config, dotted)
        if value is not None and value is not _ABSENT and (not isinstance(value, int) or value <= 0):
            raise ConfigError(f"{dotted}={value!r}: must be a positive integer")
    if (config["deployment"]["mode"] == "disaggregated") != (config["deployment"]["disaggregated"] is not None):
        raise ConfigError("deployment.disaggregated is set if, and only if, deployment.mode=disaggregated")


def _value(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _override(config: dict[str, Any], item: str) -> None:
    dotted, separator, raw = item.partition("=")
    if not separator:
        raise ConfigError(f"override {item!r}: write path=value")
    *sections, field = dotted.split(".")
    node = config
    for section in sections:
        child = node.get(section)
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: {dotted!r} is not a field of the run config")
        node = child
    if field not in node:
        raise ConfigError(f"override {item!r}: {dotted!r} is not a field of the run config")
    node[field] = yaml.safe_load(raw) if raw else ""


def load(config_path: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    """The complete config (every default filled in) with every override applied, checked."""
    path = Path(config_path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {config_path}")
    text = path.read_text(encoding="utf-8")
    config = _complete(yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text), SCHEMA, "")
    for item in overrides:
        _override(config, item)
    config = _complete(config, SCHEMA, "")
    _check_values(config)
    return config


def get(config: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path (KeyError naming the path when it is missing)."""
    value = _value(config, dotted)
    if value is _ABSENT:
        raise KeyError(f"config has no {dotted!r}")
    return value
