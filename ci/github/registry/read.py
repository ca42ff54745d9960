"""Reading guides.yaml: every entry with its defaults, each problem at its file:line with the fix."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ci.github.registry.model import DEADLINE_MARGIN_MINUTES, ENTRY_NAME, GROUPS, UPSTREAM_SIGNALS, Entry, Upstream
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
_VARIABLES = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_REPO = re.compile(r"[\w.-]+/[\w.-]+\Z")
_MIN_TIMEOUT_MINUTES = DEADLINE_MARGIN_MINUTES + 1
_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines() splits at
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"

# One mapping of guides.yaml as PyYAML composed it: each key, with its line and its value's node.
Pairs = dict[Any, tuple[int, yaml.Node]]


class _Unreadable(Exception):
    """guides.yaml is not read: not YAML, an alias, a key given twice or a key that is no plain word; at its line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing an alias (`*name`) where it is met: an alias shares its anchor's value, so a
    few lines of aliases of aliases expand to billions of items once built (a "billion laughs")."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            line = event.start_mark.line + 1 if event.start_mark else 0
            raise _Unreadable(line, "YAML aliases (*name) are not allowed here: write the value out in full")
        return super().compose_node(parent, index)


def _line(node: yaml.Node) -> int:
    """The node's 1-based line, from the mark the parser gave it."""
    return int(node.start_mark.line) + 1


def _value(node: yaml.Node) -> Any:
    """The node's value, built as yaml.safe_load builds it."""
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def _pairs(node: yaml.Node) -> Pairs:
    return {_value(key): (_line(key), value) for key, value in node.value}


def _at(pairs: Pairs, key: str) -> tuple[int, Any]:
    """The line of KEY and its value."""
    line, node = pairs[key]
    return line, _value(node)


def _built(node: yaml.Node) -> Any:
    """_value, with a scalar PyYAML cannot build (a date `2001-13-45`, `!!int x`) refused at its line."""
    try:
        return _value(node)
    except ValueError as exc:
        if node.tag.endswith(":timestamp"):
            message = f"{node.value!r} looks like a date but is none ({exc}): quote it to keep it as text"
        else:
            tag = "!!" + node.tag.rsplit(":", 1)[-1]
            message = f"{node.value!r} is no {tag} ({exc}): drop the tag {tag}, or give a value of that kind"
        raise _Unreadable(_line(node), message) from None


def _checked(node: yaml.Node) -> None:
    """Refuse what yaml.safe_load reads silently: a key given twice in one mapping (it keeps the last one), a key
    that is a list or a mapping; every other value is built once, so that a tag not to build stops here."""
    if node.tag == _MAP:
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key, line = _built(key_node), _line(key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise _Unreadable(line, "a key must be a plain word, not a list or a mapping")
            if key in first:
                raise _Unreadable(line, f"the key {key!r} is given twice in one mapping (first at line {first[key]})")
            first[key] = line
            _checked(value_node)
    elif node.tag == _SEQ:
        for item in node.value:
            _checked(item)
    else:
        _built(node)


def _compose(text: str) -> yaml.Node | None:
    """The document's node, checked (None for an empty one); _Unreadable with its line when it is not read."""
    try:
        root = yaml.compose(text, Loader=_Loader)
        if root is not None:
            _checked(root)
        return root
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise _Unreadable(mark.line + 1 if mark is not None else 0, f"not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise _Unreadable(0, f"not valid YAML: {exc}") from None


def _unknown(key: object, allowed: Iterable[str], where: str) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown key {key!r} in {where}{hint} (allowed: {', '.join(allowed)})"


def _items(line: int, node: yaml.Node) -> list[tuple[int, Any]] | None:
    """A list's items with their lines (one text is a list of one item), None when the node is neither."""
    if node.tag == _SEQ:
        return [(_line(item), _value(item)) for item in node.value]
    value = _value(node)
    return [(line, value)] if isinstance(value, str) else None


def _is_text(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


class _Reader:
    """Collects the problems of one registry file, each at its line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def keys(self, pairs: Pairs, allowed: Iterable[str], where: str) -> None:
        allowed = tuple(allowed)
        for key, (line, _) in pairs.items():
            if key not in allowed:
                self.error(line, _unknown(key, allowed, where))

    def text(self, pairs: Pairs, key: str, where: str) -> str | None:
        line, value = _at(pairs, key)
        if _is_text(value):
            return str(value)
        self.error(line, f"{where}: {key} must be text, not {_kind(value)}")
        return None

    def texts(self, pairs: Pairs, key: str, where: str) -> tuple[str, ...] | None:
        """A list of non-empty text items; one text is a list of one item."""
        items = _items(*pairs[key])
        if items is None:
            self.error(pairs[key][0], f"{where}: {key} must be a list of text, not {_kind(_at(pairs, key)[1])}")
            return None
        found = []
        for index, (line, item) in enumerate(items):
            if not _is_text(item) or not str(item).strip():
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


def _timeout(reader: _Reader, values: Pairs, where: str) -> int | None:
    line, value = _at(values, "timeout_minutes")
    if not isinstance(value, int) or isinstance(value, bool) or value < _MIN_TIMEOUT_MINUTES:
        reader.error(
            line,
            f"{where}: timeout_minutes must be a whole number of minutes, at least {_MIN_TIMEOUT_MINUTES}"
            f" (the harness's deadline is {DEADLINE_MARGIN_MINUTES} minutes below it), not {_kind(value)}",
        )
        return None
    return value


def _upstream(reader: _Reader, values: Pairs, where: str) -> Upstream | None:
    line, node = values["upstream"]
    if node.tag != _MAP:
        example = "{repo: owner/name, model: org/model, signals: [release, guide, model]}"
        reader.error(line, f"{where}: upstream must be a mapping, e.g. {example}")
        return None
    raw = _pairs(node)
    reader.keys(raw, UPSTREAM_KEYS, f"{where}'s upstream")
    found: dict[str, Any] = {}
    for key in UPSTREAM_KEYS[:-1]:
        if key in raw and (text := reader.text(raw, key, f"{where}'s upstream")) is not None:
            found[key] = text
    if found.get("repo") and not _REPO.match(found["repo"]):
        reader.error(raw["repo"][0], f"{where}: upstream repo {found['repo']!r} is not OWNER/NAME of GitHub")
    signals = reader.texts(raw, "signals", f"{where}'s upstream") if "signals" in raw else ()
    for signal in signals or ():
        if signal not in UPSTREAM_SIGNALS:
            reader.error(raw["signals"][0], _unknown(signal, UPSTREAM_SIGNALS, f"{where}'s upstream signals"))
    if signals and {"release", "branch"} <= set(signals):
        reader.error(
            raw["signals"][0],
            f"{where}: watch either the latest release (release) or a branch head (branch), not both",
        )
    return Upstream(**found, signals=tuple(signals or ()))


def _set_values(reader: _Reader, values: Pairs, where: str) -> tuple[tuple[str, str], ...] | None:
    line, node = values["set"]
    if node.tag != _MAP:
        reader.error(line, f"{where}: set must map names to values, e.g. {{model_dir: /data/m}}")
        return None
    pairs = []
    for name, (name_line, value_node) in _pairs(node).items():
        value = _value(value_node)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not str(name) or "=" in str(name) or isinstance(value, (dict, list)) or value is None:
            reader.error(name_line, f"{where}: set {name!r} must be a NAME (no '=') with a plain value")
        elif _LINE_BREAK.search(f"{name}{text}"):
            # the matrix hands the values on one per line (NAME=VALUE), each line one --set
            reader.error(
                _line(value_node),
                f"{where}: set {name!r} must be one line: the values reach ci.run one per line, so a line break"
                " would split it in two; write it on one line (a block can add the line breaks it needs)",
            )
        else:
            pairs.append((str(name), text))
    return tuple(pairs)


def _secret_names(reader: _Reader, values: Pairs, where: str) -> tuple[str, ...] | None:
    """The names of the secrets the entry's blocks get: variable names GitHub allows for secrets, e.g. [HF_TOKEN]."""
    names = reader.texts(values, "secrets", where)
    before = len(reader.problems)
    for line, name in _items(*values["secrets"]) or ():
        problem = secret_name_problem(str(name)) if _is_text(name) and str(name).strip() else None
        if problem:
            reader.error(line, f"{where}: {problem} (secrets lists names, e.g. [HF_TOKEN, MODELSCOPE_API_TOKEN])")
    return None if names is None or len(reader.problems) > before else names


def _choice(reader: _Reader, values: Pairs, key: str, where: str) -> Any:
    """schedule, monitor, name and variables: a value from a fixed set or of a fixed form."""
    line, value = _at(values, key)
    if key == "schedule" and value not in GROUPS:
        reader.error(line, f"{where}: schedule must be one of {', '.join(GROUPS)}, not {_kind(value)}")
    elif key == "monitor" and not isinstance(value, bool):
        reader.error(line, f"{where}: monitor must be true or false, not {_kind(value)}")
    elif key == "name" and not (isinstance(value, str) and ENTRY_NAME.match(value)):
        reader.error(line, f"{where}: name {value!r} must be letters, digits and dashes (at most 80)")
    elif key == "variables" and not (isinstance(value, str) and _VARIABLES.match(value)):
        reader.error(line, f"{where}: variables {value!r} must be a prefix of variable names, e.g. SPECFORGE")
    else:
        return value
    return None


def _field(reader: _Reader, values: Pairs, key: str, where: str) -> Any:
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
            reader.error(values[key][0], f"{where}: runner needs at least one label, e.g. [ubuntu-latest]")
            return None
        return found
    if key == "timeout_minutes":
        return _timeout(reader, values, where)
    if key == "upstream":
        return _upstream(reader, values, where)
    if key in ("dialect", "timeout_rules"):
        return _how_read(reader, values, key, where)
    return _set_values(reader, values, where)


def _how_read(reader: _Reader, values: Pairs, key: str, where: str) -> Any:
    """dialect and timeout_rules, read as ci.run's --dialect and a guide's ci.timeout_rules are; None after a problem."""
    line, value = _at(values, key)
    try:
        return parse_dialect(str(value)) if key == "dialect" else parse_timeout_rules(value)
    except ValueError as exc:
        reader.error(line, f"{where}: {key}: {exc}")
        return None


def _entry(reader: _Reader, node: yaml.Node, defaults: Pairs) -> Entry | None:
    line = _line(node)
    if node.tag != _MAP:
        reader.error(line, f"each item of guides must be a mapping with a name and a guide, not {_kind(_value(node))}")
        return None
    raw = _pairs(node)
    name = _at(raw, "name")[1] if "name" in raw else None
    where = f"entry {name!r}" if isinstance(name, str) else f"the entry at line {line}"
    reader.keys(raw, ENTRY_KEYS, where)
    merged = {key: pair for key, pair in (*defaults.items(), *raw.items()) if key in ENTRY_KEYS}
    for key in _REQUIRED:
        if key not in merged:
            fix = "every entry names its own" if key in _PER_ENTRY else "give it in the entry or in defaults"
            reader.error(line, f"{where}: {key} is missing; {fix}, e.g. {_EXAMPLES[key]}")
    missing = [key for key in _REQUIRED if key not in merged]
    before = len(reader.problems)
    fields = {key: _field(reader, merged, key, where) for key in ENTRY_KEYS if key in merged}
    if missing or len(reader.problems) > before:
        return None
    return Entry(line=line, lines={key: key_line for key, (key_line, _) in merged.items()}, **fields)


def _defaults(reader: _Reader, document: Pairs) -> Pairs:
    if "defaults" not in document:
        return {}
    line, node = document["defaults"]
    if node.tag != _MAP:
        reader.error(line, "defaults must be a mapping of entry keys, e.g. {runner: [ubuntu-latest]}")
        return {}
    defaults = _pairs(node)
    reader.keys(defaults, [key for key in ENTRY_KEYS if key not in _PER_ENTRY], "defaults")
    return {key: pair for key, pair in defaults.items() if key in ENTRY_KEYS and key not in _PER_ENTRY}


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


def _document(reader: _Reader, path: Path) -> tuple[Pairs, yaml.Node] | None:
    """The registry's top-level keys and its `guides` list, None after a problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reader.error(0, f"cannot read the registry: {getattr(exc, 'strerror', None) or exc}")
        return None
    try:
        root = _compose(text)
    except _Unreadable as problem:
        reader.error(problem.line, str(problem))
        return None
    document = _pairs(root) if root is not None and root.tag == _MAP else None
    if document is None or "guides" not in document or document["guides"][1].tag != _SEQ:
        line = 1 if root is None or document is None else document.get("guides", (_line(root),))[0]
        reader.error(line, "the registry needs a list `guides:` of entries (each with a name and a guide)")
        return None
    reader.keys(document, TOP_KEYS, "the registry")
    return document, document["guides"][1]


def read_entries(path: Path, shown: str) -> tuple[list[Entry], list[Problem]]:
    """The entries of the registry at PATH (named SHOWN in messages), and every problem found in it."""
    reader = _Reader(shown)
    found = _document(reader, path)
    if found is None:
        return [], reader.problems
    document, guides = found
    defaults = _defaults(reader, document)
    entries = [entry for item in guides.value if (entry := _entry(reader, item, defaults))]
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
