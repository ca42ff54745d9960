"""Reading guides.yaml: every entry with its defaults, each problem at its file:line with the fix."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ci.github.registry.model import DEADLINE_MARGIN_MINUTES, GROUPS, UPSTREAM_SIGNALS, Entry, Upstream
from ci.github.registry.yamllines import LinedList, LinedMap, YamlProblem, load_lined
from ci.github.secrets import secret_name_problem
from ci.guide.limits import parse_dialect, parse_timeout_rules
from ci.guide.model import Problem
from ci.maintain.guide import Reading

__all__ = ["ENTRY_KEYS", "TOP_KEYS", "UPSTREAM_KEYS", "read_entries", "registered_readings"]

TOP_KEYS = ("defaults", "guides")
ENTRY_KEYS = (
    "name",
    "guide",
    "runner",
    "image",
    "container_options",
    "timeout_minutes",
    "schedule",
    "monitor",
    "upstream",
    "set",
    "only",
    "variables",
    "secrets",
    "dialect",
    "timeout_rules",
)
UPSTREAM_KEYS = ("repo", "branch", "ref", "model", "model_revision", "signals")
_PER_ENTRY = ("name", "guide")  # never a default
_REQUIRED = ("name", "guide", "runner")
_EXAMPLES = {"name": "name: my-guide", "guide": "guide: docs/my-guide.md", "runner": "runner: [ubuntu-latest]"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,79}\Z")  # an artifact name, a cache key, a file name
_VARIABLES = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_REPO = re.compile(r"[\w.-]+/[\w.-]+\Z")
_MIN_TIMEOUT_MINUTES = DEADLINE_MARGIN_MINUTES + 1


def _unknown(key: object, allowed: Iterable[str], where: str) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown key {key!r} in {where}{hint} (allowed: {', '.join(allowed)})"


class _Reader:
    """Collects the problems of one registry file, each at its line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def keys(self, mapping: LinedMap, allowed: Iterable[str], where: str) -> None:
        allowed = tuple(allowed)
        for key in mapping:
            if key not in allowed:
                self.error(mapping.line_of(key), _unknown(key, allowed, where))

    def text(self, mapping: LinedMap, key: str, where: str) -> str | None:
        value = mapping[key]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        self.error(mapping.line_of(key), f"{where}: {key} must be text, not {_kind(value)}")
        return None

    def texts(self, mapping: LinedMap, key: str, where: str) -> tuple[str, ...] | None:
        """A list of non-empty text items; one text is a list of one item."""
        value = mapping[key]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            self.error(mapping.line_of(key), f"{where}: {key} must be a list of text, not {_kind(value)}")
            return None
        found = []
        for index, item in enumerate(items):
            line = items.line_of(index) if isinstance(items, LinedList) else mapping.line_of(key)
            if not isinstance(item, (str, int, float)) or isinstance(item, bool) or not str(item).strip():
                self.error(line, f"{where}: item {index + 1} of {key} must be non-empty text, not {_kind(item)}")
            else:
                found.append(str(item))
        return tuple(found)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (YAML's yes/no/on/off/true/false: quote it)"
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _timeout(reader: _Reader, values: LinedMap, where: str) -> int | None:
    value = values["timeout_minutes"]
    if not isinstance(value, int) or isinstance(value, bool) or value < _MIN_TIMEOUT_MINUTES:
        reader.error(
            values.line_of("timeout_minutes"),
            f"{where}: timeout_minutes must be a whole number of minutes, at least {_MIN_TIMEOUT_MINUTES}"
            f" (the harness's deadline is {DEADLINE_MARGIN_MINUTES} minutes below it), not {_kind(value)}",
        )
        return None
    return value


def _upstream(reader: _Reader, values: LinedMap, where: str) -> Upstream | None:
    raw = values["upstream"]
    if not isinstance(raw, LinedMap):
        example = "{repo: owner/name, model: org/model, signals: [release, guide, model]}"
        reader.error(values.line_of("upstream"), f"{where}: upstream must be a mapping, e.g. {example}")
        return None
    reader.keys(raw, UPSTREAM_KEYS, f"{where}'s upstream")
    found: dict[str, Any] = {}
    for key in UPSTREAM_KEYS[:-1]:
        if key in raw and (text := reader.text(raw, key, f"{where}'s upstream")) is not None:
            found[key] = text
    if found.get("repo") and not _REPO.match(found["repo"]):
        reader.error(raw.line_of("repo"), f"{where}: upstream repo {found['repo']!r} is not OWNER/NAME of GitHub")
    signals = reader.texts(raw, "signals", f"{where}'s upstream") if "signals" in raw else ()
    for signal in signals or ():
        if signal not in UPSTREAM_SIGNALS:
            reader.error(raw.line_of("signals"), _unknown(signal, UPSTREAM_SIGNALS, f"{where}'s upstream signals"))
    if signals and {"release", "branch"} <= set(signals):
        reader.error(
            raw.line_of("signals"),
            f"{where}: watch either the latest release (release) or a branch head (branch), not both",
        )
    return Upstream(**found, signals=tuple(signals or ()))


def _set_values(reader: _Reader, values: LinedMap, where: str) -> tuple[tuple[str, str], ...] | None:
    raw = values["set"]
    if not isinstance(raw, LinedMap):
        reader.error(values.line_of("set"), f"{where}: set must map names to values, e.g. {{model_dir: /data/m}}")
        return None
    pairs = []
    for name, value in raw.items():
        if not str(name) or "=" in str(name) or isinstance(value, (dict, list)) or value is None:
            reader.error(raw.line_of(name), f"{where}: set {name!r} must be a NAME (no '=') with a plain value")
        else:
            pairs.append((str(name), str(value).lower() if isinstance(value, bool) else str(value)))
    return tuple(pairs)


def _secret_names(reader: _Reader, values: LinedMap, where: str) -> tuple[str, ...] | None:
    """The names of the secrets the entry's blocks get: variable names GitHub allows for secrets, e.g. [HF_TOKEN]."""
    names = reader.texts(values, "secrets", where)
    raw = values["secrets"]
    before = len(reader.problems)
    for index, name in enumerate(names or ()):
        problem = secret_name_problem(name)
        if problem:
            line = raw.line_of(index) if isinstance(raw, LinedList) else values.line_of("secrets")
            reader.error(line, f"{where}: {problem} (secrets lists names, e.g. [HF_TOKEN, MODELSCOPE_API_TOKEN])")
    return None if names is None or len(reader.problems) > before else names


def _choice(reader: _Reader, values: LinedMap, key: str, where: str) -> Any:
    """schedule, monitor, name and variables: a value from a fixed set or of a fixed form."""
    value = values[key]
    line = values.line_of(key)
    if key == "schedule" and value not in GROUPS:
        reader.error(line, f"{where}: schedule must be one of {', '.join(GROUPS)}, not {_kind(value)}")
    elif key == "monitor" and not isinstance(value, bool):
        reader.error(line, f"{where}: monitor must be true or false, not {_kind(value)}")
    elif key == "name" and not (isinstance(value, str) and _NAME.match(value)):
        reader.error(line, f"{where}: name {value!r} must be letters, digits and dashes (at most 80)")
    elif key == "variables" and not (isinstance(value, str) and _VARIABLES.match(value)):
        reader.error(line, f"{where}: variables {value!r} must be a prefix of variable names, e.g. SPECFORGE")
    else:
        return value
    return None


def _field(reader: _Reader, values: LinedMap, key: str, where: str) -> Any:
    """The checked value of KEY, None after a problem."""
    if key in ("name", "schedule", "monitor", "variables"):
        return _choice(reader, values, key, where)
    if key in ("guide", "image", "container_options"):
        return reader.text(values, key, where)
    if key == "secrets":
        return _secret_names(reader, values, where)
    if key in ("runner", "only"):
        found = reader.texts(values, key, where)
        if key == "runner" and found == ():
            reader.error(values.line_of(key), f"{where}: runner needs at least one label, e.g. [ubuntu-latest]")
            return None
        return found
    if key == "timeout_minutes":
        return _timeout(reader, values, where)
    if key == "upstream":
        return _upstream(reader, values, where)
    if key in ("dialect", "timeout_rules"):
        return _how_read(reader, values, key, where)
    return _set_values(reader, values, where)


def _how_read(reader: _Reader, values: LinedMap, key: str, where: str) -> Any:
    """dialect and timeout_rules, read as ci.run's --dialect and a guide's ci.timeout_rules are; None after a problem."""
    try:
        return parse_dialect(str(values[key])) if key == "dialect" else parse_timeout_rules(values[key])
    except ValueError as exc:
        reader.error(values.line_of(key), f"{where}: {key}: {exc}")
        return None


def _entry(reader: _Reader, raw: object, line: int, defaults: LinedMap) -> Entry | None:
    if not isinstance(raw, LinedMap):
        reader.error(line, f"each item of guides must be a mapping with a name and a guide, not {_kind(raw)}")
        return None
    where = f"entry {raw['name']!r}" if isinstance(raw.get("name"), str) else f"the entry at line {raw.line}"
    reader.keys(raw, ENTRY_KEYS, where)
    merged = LinedMap()
    merged.line = raw.line
    for source in (defaults, raw):
        for key, value in source.items():
            if key in ENTRY_KEYS:
                merged[key] = value
                merged.lines[key] = source.line_of(key)
    for key in _REQUIRED:
        if key not in merged:
            fix = "every entry names its own" if key in _PER_ENTRY else "give it in the entry or in defaults"
            reader.error(raw.line, f"{where}: {key} is missing; {fix}, e.g. {_EXAMPLES[key]}")
    missing = [key for key in _REQUIRED if key not in merged]
    before = len(reader.problems)
    fields = {key: _field(reader, merged, key, where) for key in ENTRY_KEYS if key in merged}
    if missing or len(reader.problems) > before:
        return None
    return Entry(line=raw.line, lines=dict(merged.lines), **fields)


def _defaults(reader: _Reader, document: LinedMap) -> LinedMap:
    defaults = document.get("defaults", LinedMap())
    if not isinstance(defaults, LinedMap):
        reader.error(
            document.line_of("defaults"), "defaults must be a mapping of entry keys, e.g. {runner: [ubuntu-latest]}"
        )
        return LinedMap()
    reader.keys(defaults, [key for key in ENTRY_KEYS if key not in _PER_ENTRY], "defaults")
    kept = LinedMap()
    kept.line = defaults.line
    for key, value in defaults.items():
        if key in ENTRY_KEYS and key not in _PER_ENTRY:
            kept[key] = value
            kept.lines[key] = defaults.line_of(key)
    return kept


def _duplicates(reader: _Reader, entries: Iterable[Entry]) -> None:
    first: dict[str, int] = {}
    for entry in entries:
        if entry.name in first:
            reader.error(
                entry.line,
                f"entry {entry.name!r}: the name is taken by the entry at line {first[entry.name]}; give each entry its own name",
            )
        else:
            first[entry.name] = entry.line


def _document(reader: _Reader, path: Path) -> LinedMap | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reader.error(0, f"cannot read the registry: {getattr(exc, 'strerror', None) or exc}")
        return None
    try:
        document = load_lined(text)
    except YamlProblem as problem:
        reader.error(problem.line, problem.message)
        return None
    if not isinstance(document, LinedMap) or not isinstance(document.get("guides"), LinedList):
        line = document.line_of("guides") if isinstance(document, LinedMap) else 1
        reader.error(line, "the registry needs a list `guides:` of entries (each with a name and a guide)")
        return None
    reader.keys(document, TOP_KEYS, "the registry")
    return document


def read_entries(path: Path, shown: str) -> tuple[list[Entry], list[Problem]]:
    """The entries of the registry at PATH (named SHOWN in messages), and every problem found in it."""
    reader = _Reader(shown)
    document = _document(reader, path)
    if document is None:
        return [], reader.problems
    defaults = _defaults(reader, document)
    guides: LinedList = document["guides"]
    entries = [e for i, raw in enumerate(guides) if (e := _entry(reader, raw, guides.line_of(i), defaults))]
    _duplicates(reader, entries)
    return entries, reader.problems


def registered_readings(registry: str) -> tuple[dict[str, Reading], list[Problem]]:
    """The local guides the registry file names (as real paths), each with its entry's dialect and time-limit
    rules, and every problem of the registry; nothing when there is no such file."""
    path = Path(registry)
    if not os.path.lexists(path):
        return {}, []
    entries, problems = read_entries(path, registry)
    readings = {
        os.path.realpath(path.parent / entry.guide): Reading(entry.dialect, entry.timeout_rules)
        for entry in entries
        if not entry.is_url
    }
    return readings, problems
