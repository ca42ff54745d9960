"""Secrets a guide's blocks get by name: which names may be given, and the named ones picked out of a job's secrets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Picked", "missing_secret_message", "pick_secrets", "secret_name_problem", "split_names"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEPARATORS = re.compile(r"[\s,]+")


def secret_name_problem(name: str) -> str | None:
    """What is wrong with NAME as the name of a secret the blocks get as a variable; None when nothing is."""
    if not _NAME.match(name):
        return f"secret {name!r} is not a variable name: letters, digits and underscores, not starting with a digit"
    if name.upper().startswith("GITHUB_"):
        return f"secret {name!r}: GitHub reserves GITHUB_ names (no secret can have one); name the secret otherwise"
    return None


def split_names(text: str) -> list[str]:
    """The names in TEXT, separated by blanks, commas or line breaks (an action input, a matrix value)."""
    return [name for name in _SEPARATORS.split(text) if name]


def missing_secret_message(name: str) -> str:
    """What is said of a named secret the blocks would run without."""
    return (
        f"secret {name} is named for the guide's blocks but is not set or is empty: add it in the repository's"
        " settings (Secrets and variables > Actions) and pass it to the workflow (`secrets: inherit`),"
        " or stop naming it (the registry entry's `secrets`, the action's `secrets` input)"
    )


@dataclass(frozen=True)
class Picked:
    """The named secrets found among a job's secrets, and those that were not."""

    found: dict[str, str]  # name as given -> its value (non-empty), in the order the names were given
    missing: tuple[str, ...]  # names that are not among the secrets, or whose value is empty


def pick_secrets(secrets: Mapping[str, object], names: Sequence[str]) -> Picked:
    """NAMES out of SECRETS (name -> value). GitHub's secret names are case-insensitive: a name matches a key that
    differs in case only when no key matches it exactly."""
    folded = {key.upper(): key for key in secrets}
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in dict.fromkeys(names):
        key = name if name in secrets else folded.get(name.upper(), name)
        value = secrets.get(key)
        if isinstance(value, str) and value:
            found[name] = value
        else:
            missing.append(name)
    return Picked(found, tuple(missing))
