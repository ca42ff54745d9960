"""Front matter: a guide's `ci:` settings, each bad value a document error at its own line; and durations."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ci.base import lazy_import
from ci.guide.limits import MAX_DURATION_S, parse_dialect, parse_duration, parse_timeout_rules, shown_text
from ci.guide.model import GuideSettings, Problem, TimeoutRule, closest
from ci.guide.parse import ParsedGuide

if TYPE_CHECKING:
    import yaml
else:
    yaml = lazy_import("yaml")

__all__ = [
    "DEFAULT_RETRY_DELAY_S",
    "MAX_DURATION_S",
    "MAX_RETRY",
    "MAX_RETRY_DELAY_S",
    "guide_settings",
    "key_line",
    "parse_duration",
    "parse_retry",
    "parse_retry_delay",
]

_FRONT_MATTER_KEYS = {
    "timeout",
    "error_markers",
    "env",
    "upstream",
    "collect",
    "diagnostics",
    "diagnostics_timeout",
    "cleanup",
    "cleanup_timeout",
    "retry",
    "retry_delay",
    "dialect",
    "timeout_rules",
}
# the front-matter lists of text, with what an item is and an example for messages
_TEXT_LISTS = {
    "collect": ("a glob", '["/tmp/server-*.log", "~/app/log/*.txt"]'),
    "diagnostics": ("a command", '["npu-smi info", "tail -n 100 /tmp/server.log"]'),
    "cleanup": ("a command", '["rm -rf /tmp/smoke-work"]'),
}

_T = TypeVar("_T")

MAX_RETRY = 10  # the most retries a block may have: a step that fails eleven times in a row is broken, not flaky
DEFAULT_RETRY_DELAY_S = 10.0  # the pause before a retry unless retry_delay= says: long enough for a network blip
MAX_RETRY_DELAY_S = 3600.0  # the longest pause before a retry: an hour


def parse_retry(text: str) -> int:
    """How many retries `retry="N"` asks for: a whole number from 0 to MAX_RETRY; ValueError otherwise."""
    written = str(text).strip()
    if not written.isdecimal() or not written.isascii():
        raise ValueError(f"bad number of retries {shown_text(text)}: give a whole number from 0 to {MAX_RETRY}, e.g. 2")
    if int(written) > MAX_RETRY:
        raise ValueError(
            f"{shown_text(text)} retries is over the maximum of {MAX_RETRY}: a step that fails that often is broken,"
            " not flaky; give at most 10"
        )
    return int(written)


def parse_retry_delay(text: str) -> float:
    """The pause before a retry: 0, or a duration as `timeout=` takes (`90`, `30s`, `10m`) up to an hour; ValueError otherwise."""
    if str(text).strip() in ("0", "0s", "0.0"):
        return 0.0
    seconds = parse_duration(text)
    if seconds > MAX_RETRY_DELAY_S:
        raise ValueError(f"retry delay {shown_text(text)} is over the maximum of an hour: give at most 60m")
    return seconds


def _list(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def guide_settings(parsed: ParsedGuide) -> tuple[GuideSettings, list[Problem]]:
    """The settings of the front matter's `ci:` mapping (defaults without one), and every problem found in it."""
    reader = _Reader(parsed.file, parsed.front_matter_line)
    if parsed.front_matter is None:
        return GuideSettings(), reader.problems
    section = reader.section(parsed.front_matter)
    if section is None:
        return GuideSettings(), reader.problems
    for key in section:
        if key not in _FRONT_MATTER_KEYS:
            meant = closest(str(key), _FRONT_MATTER_KEYS)
            guess = f"did you mean ci.{meant}? " if meant else ""
            message = f"front matter: unknown key ci.{key}; {guess}allowed: {_list(_FRONT_MATTER_KEYS)}"
            reader.error(reader.line_of(str(key)), message)
    # read in this order, so that problems on one line keep the order they have always had
    timeout_s = reader.duration(section, "timeout")
    error_markers = reader.markers(section)
    env = reader.env(section)
    upstream = reader.upstream(section)
    diagnostics_timeout_s = reader.duration(section, "diagnostics_timeout")
    cleanup_timeout_s = reader.duration(section, "cleanup_timeout")
    retry = reader.parsed(section, "retry", parse_retry)
    retry_delay_s = reader.parsed(section, "retry_delay", parse_retry_delay)
    dialect = reader.parsed(section, "dialect", parse_dialect)
    timeout_rules = reader.rules(section)
    settings = GuideSettings(
        timeout_s=timeout_s,
        error_markers=error_markers,
        env=env,
        upstream=upstream,
        collect=reader.text_list(section, "collect"),
        diagnostics=reader.text_list(section, "diagnostics"),
        diagnostics_timeout_s=diagnostics_timeout_s,
        cleanup=reader.text_list(section, "cleanup"),
        cleanup_timeout_s=cleanup_timeout_s,
        retry=retry,
        retry_delay_s=retry_delay_s,
        dialect=dialect,
        timeout_rules=timeout_rules,
    )
    return settings, reader.problems


class _Reader:
    """Reads the `ci:` mapping of one guide's front matter, collecting every problem with its line."""

    def __init__(self, file: str, front_matter_line: int) -> None:
        self.file = file
        self.line = front_matter_line  # the opening `---`
        self.key_lines: dict[str, int] = {}
        self.nodes: dict[str, yaml.Node] = {}  # the value of each key under `ci:`, as composed: scalars as written
        self.problems: list[Problem] = []

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)

    def section(self, front_matter: str) -> dict[Any, Any] | None:
        """The `ci:` mapping, or None when there is none (or it is not usable: a problem then)."""
        try:
            data = yaml.safe_load(front_matter)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = self.line + 1 + mark.line if mark is not None else self.line
            self.error(at, f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}")
            return None
        if not isinstance(data, dict) or data.get("ci") is None:
            return None
        alias_line = _alias_under_ci(front_matter)
        if alias_line is not None:
            self.error(
                self.line + 1 + alias_line,
                "front matter: YAML aliases (*name) are not allowed under ci: write the value out in full",
            )
            return None
        self.key_lines = _key_lines(front_matter, self.line)
        self.nodes = _ci_nodes(front_matter)
        duplicates = _duplicate_keys(front_matter, self.line)
        for line, message in duplicates:
            self.error(line, message)
        if duplicates:
            return None
        section: Any = data["ci"]
        if not isinstance(section, dict):
            self.error(self.line_of(""), f"front matter: 'ci' must be a mapping ({_list(_FRONT_MATTER_KEYS)})")
            return None
        return section

    def duration(self, section: dict[Any, Any], key: str) -> float | None:
        if section.get(key) is None:
            return None
        try:
            return parse_duration(_written(self.nodes.get(key), section[key]))
        except ValueError as exc:
            self.error(self.line_of(key), f"front matter ci.{key}: {exc}")
            return None

    def parsed(self, section: dict[Any, Any], key: str, parse: Callable[[str], _T]) -> _T | None:
        """The value of ci.KEY read by PARSE from its text as written; None when not given or bad (a problem then)."""
        if section.get(key) is None:
            return None
        try:
            return parse(_written(self.nodes.get(key), section[key]))
        except ValueError as exc:
            self.error(self.line_of(key), f"front matter ci.{key}: {exc}")
            return None

    def rules(self, section: dict[Any, Any]) -> tuple[TimeoutRule, ...]:
        """ci.timeout_rules read by parse_timeout_rules; () when not given or bad (a problem then)."""
        if section.get("timeout_rules") is None:
            return ()
        try:
            return parse_timeout_rules(section["timeout_rules"])
        except ValueError as exc:
            self.error(self.line_of("timeout_rules"), f"front matter ci.timeout_rules: {exc}")
            return ()

    def markers(self, section: dict[Any, Any]) -> tuple[str, ...]:
        node = self.nodes.get("error_markers")
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        markers = [_written(item, None) if isinstance(item, yaml.ScalarNode) else None for item in items]
        if node is None or (isinstance(node, yaml.ScalarNode) and node.value == "" and node.style is None):
            return ()
        if isinstance(node, yaml.MappingNode) or not all(markers):
            self.error(
                self.line_of("error_markers"), "front matter ci.error_markers must be a list of non-empty strings"
            )
            return ()
        return tuple(str(marker) for marker in markers)

    def env(self, section: dict[Any, Any]) -> dict[str, str]:
        env = section.get("env") or {}
        node = self.nodes.get("env")
        if not isinstance(env, dict) or any(isinstance(v, (dict, list)) for v in env.values()):
            self.error(
                self.line_of("env"), 'front matter ci.env must map names to plain values, e.g. PYTHONUNBUFFERED: "1"'
            )
            return {}
        # names and values as written: YAML would make 3.10 into 3.1, 0022 into 18, 1:30 into 90, on into true
        pairs = node.value if isinstance(node, yaml.MappingNode) else []
        values = {str(key.value): _written(value, None) for key, value in pairs}
        for name, value in values.items():
            problem = _env_problem(name, value)
            if problem:
                self.error(self.key_lines.get(f"env.{name}", self.line_of("env")), f"front matter ci.env: {problem}")
        return {name: value for name, value in values.items() if not _env_problem(name, value)}

    def upstream(self, section: dict[Any, Any]) -> dict[str, str]:
        upstream = section.get("upstream") or {}
        if not isinstance(upstream, dict):
            self.error(
                self.line_of("upstream"),
                "front matter ci.upstream must be a mapping, e.g. {repo: owner/name, model: org/model}",
            )
            return {}
        node = self.nodes.get("upstream")
        pairs = node.value if isinstance(node, yaml.MappingNode) else []
        return {str(key.value): _written(value, upstream.get(key.value)) for key, value in pairs}

    def text_list(self, section: dict[Any, Any], key: str) -> tuple[str, ...]:
        """A front-matter list of non-empty strings (ci.collect, ci.diagnostics, ci.cleanup); each bad item is a
        document error."""
        what, example = _TEXT_LISTS[key]
        key_line = self.line_of(key)
        value = section.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            fix = (
                f"write it as a list: {key}: [{_quoted(value)}]" if isinstance(value, str) else f"e.g. {key}: {example}"
            )
            self.error(key_line, f"front matter ci.{key} must be a list of strings, {what} per item; {fix}")
            return ()
        items = []
        for index, item in enumerate(value):
            if isinstance(item, str) and item.strip():
                items.append(item)
                continue
            where = f"front matter ci.{key}: item {index + 1}"
            self.error(self.key_lines.get(f"{key}[{index}]", key_line), f"{where} {_not_text(item, what)}")
        return tuple(items)


def _not_text(item: object, what: str) -> str:
    """What is wrong with a list item that is not a non-empty string, and the fix; after `... item N`."""
    if isinstance(item, str) or item is None:
        return f"is empty; give {what} or remove the item"
    if isinstance(item, dict):
        # `- echo a: b` is a mapping to YAML: a colon and a space end a key
        text = ", ".join(f"{k}: {v}" for k, v in item.items())
        return f"reads as a mapping, not as {what}: quote it, e.g. - {_quoted(text)}"
    if isinstance(item, list):
        return f"is a nested list; give each {what.split()[-1]} as an item of its own"
    if isinstance(item, bool):
        return f"reads as {str(item).lower()} (YAML's yes/no/on/off/true/false): quote it"
    kind = "the number" if isinstance(item, (int, float)) else "the value"
    return f"reads as {kind} {item}, not {what}: quote it, e.g. - {_quoted(str(item))}"


def _env_problem(name: str, value: str) -> str | None:
    """Why NAME=VALUE cannot go into a process's environment (the first spawn would fail), with the fix; None if it can."""
    if not name:
        return 'a variable has an empty name; give it one, e.g. PYTHONUNBUFFERED: "1"'
    if "=" in name:
        return f"the name {name!r} contains '=', which ends a name in an environment; remove it or use _"
    if "\0" in name:
        return f"the name {name!r} contains a NUL character; remove it"
    if "\0" in value:
        return f"the value of {name} contains a NUL character, which no environment can hold; remove it"
    return None


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alias_under_ci(front_matter: str) -> int | None:
    """The 0-based front-matter line of the first alias in the `ci:` value, None without one.

    An alias shares its anchor's value, so nine aliases of nine aliases of ... are a few lines that
    expand to billions of items as soon as the settings are read as text (a "billion laughs"). Aliases
    elsewhere in the front matter are left alone: nothing reads those values.
    """
    root = yaml.compose(front_matter, Loader=yaml.SafeLoader)  # composing shares an alias's node: cheap
    if not isinstance(root, yaml.MappingNode):
        return None
    keys = [key for key, _ in root.value]
    for index, key in enumerate(keys):
        if key.value != "ci":
            continue
        start = key.end_mark.index  # the value runs from its key up to the next key (or the end)
        end = keys[index + 1].start_mark.index if index + 1 < len(keys) else len(front_matter)
        for event in yaml.parse(front_matter, Loader=yaml.SafeLoader):
            mark = event.start_mark
            if isinstance(event, yaml.AliasEvent) and mark is not None and start <= mark.index < end:
                return int(mark.line)
    return None


def key_line(parsed: ParsedGuide, key: str) -> int:
    """The guide line of the front matter's ci.KEY (of its opening line when it is not there)."""
    return _key_lines(parsed.front_matter or "", parsed.front_matter_line).get(key, parsed.front_matter_line)


def _key_lines(front_matter: str, opening_line: int) -> dict[str, int]:
    """1-based guide lines of the keys under `ci:` ("" is the line of `ci:` itself)."""
    lines: dict[str, int] = {}
    root = yaml.compose(front_matter, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key_node, value_node in root.value:
        if key_node.value != "ci":
            continue
        lines[""] = opening_line + 1 + key_node.start_mark.line
        if isinstance(value_node, yaml.MappingNode):
            for sub_key, sub_value in value_node.value:
                lines[str(sub_key.value)] = opening_line + 1 + sub_key.start_mark.line
                if isinstance(sub_value, yaml.MappingNode):  # "env.NAME": the line of each name under a mapping
                    for item_key, _ in sub_value.value:
                        lines[f"{sub_key.value}.{item_key.value}"] = opening_line + 1 + item_key.start_mark.line
                if isinstance(sub_value, yaml.SequenceNode):  # "collect[0]": the line of a list's first item
                    for index, item in enumerate(sub_value.value):
                        lines[f"{sub_key.value}[{index}]"] = opening_line + 1 + item.start_mark.line
    return lines


def _written(node: yaml.Node | None, loaded: object) -> str:
    """A scalar's text as the guide writes it (a quoted one without its quotes, escapes read); nothing written
    is the empty text. A value that is no scalar (a list, a mapping) is LOADED as text."""
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return "" if loaded is None else str(loaded)


def _ci_nodes(front_matter: str) -> dict[str, yaml.Node]:
    """The value node of each key under `ci:` (aliases under it are refused before this is read)."""
    root = yaml.compose(front_matter, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return {}
    for key, value in root.value:
        if key.value == "ci" and isinstance(value, yaml.MappingNode):
            return {str(sub_key.value): sub_value for sub_key, sub_value in value.value}
    return {}


def _duplicate_keys(front_matter: str, opening_line: int) -> list[tuple[int, str]]:
    """A problem for each key given twice in one mapping, under `ci:` or `ci` itself: YAML keeps the last."""
    root = yaml.compose(front_matter, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return []
    found: list[tuple[int, str]] = []
    pending: list[tuple[yaml.MappingNode, str]] = [(root, "")]
    while pending:
        mapping, path = pending.pop()
        first: dict[str, int] = {}
        for key, value in mapping.value:
            if not path and key.value != "ci":
                continue  # the rest of the front matter is not the harness's
            name = f"{path}.{key.value}" if path else str(key.value)
            line = opening_line + 1 + key.start_mark.line
            if name in first:
                found.append(
                    (
                        line,
                        f"front matter: {name} is given twice (first at line {first[name]}), and YAML would keep"
                        " only the last: keep one",
                    )
                )
            first.setdefault(name, line)
            if isinstance(value, yaml.MappingNode):
                pending.append((value, name))
    return sorted(found)
