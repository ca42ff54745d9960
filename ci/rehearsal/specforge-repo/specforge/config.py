"""[simulation] Run configs: a YAML or JSON file plus dotted `section.field=value` overrides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """The config file or an override does not fit the recipe's fields."""


def load(config_path: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    """The config with every override applied; an override may only set a field the recipe has."""
    path = Path(config_path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {config_path}")
    text = path.read_text(encoding="utf-8")
    config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(config, dict):
        raise ConfigError(f"{config_path}: the config must be a mapping")
    for item in overrides:
        dotted, separator, raw = item.partition("=")
        if not separator or "." not in dotted:
            raise ConfigError(f"override {item!r}: write section.field=value")
        *sections, field = dotted.split(".")
        node = config
        for section in sections:
            child = node.get(section)
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: unknown config section {section!r}")
            node = child
        if field not in node:
            raise ConfigError(f"override {item!r}: unknown config field {dotted!r}")
        node[field] = yaml.safe_load(raw) if raw else ""
    return config


def get(config: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path (KeyError naming the path when it is missing)."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"config has no {dotted!r}")
        node = node[part]
    return node
