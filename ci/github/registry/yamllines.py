"""YAML read with the line of every key and item, so that each problem found in a value can name its line.

Aliases (`*name`) are refused before anything is built: an alias shares its anchor's value, so a few
lines of aliases of aliases expand to billions of items once read (a "billion laughs"). A key given twice
in one mapping is a problem too, where YAML would silently keep the last one.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["LinedList", "LinedMap", "YamlProblem", "load_lined"]


class YamlProblem(Exception):
    """The text cannot be read as YAML here: a syntax error, an alias or a repeated key, with its 1-based line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class LinedMap(dict[Any, Any]):
    """A mapping with the 1-based line of itself (`line`) and of each of its keys (`lines`)."""

    line: int = 0

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[Any, int] = {}

    def line_of(self, key: Any) -> int:
        """The line of KEY, else of the mapping itself."""
        return self.lines.get(key, self.line)


class LinedList(list[Any]):
    """A sequence with the 1-based line of itself (`line`) and of each of its items (`lines`)."""

    line: int = 0

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[int] = []

    def line_of(self, index: int) -> int:
        return self.lines[index] if 0 <= index < len(self.lines) else self.line


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, building LinedMap and LinedList (eagerly: aliases are refused, so no cycle exists)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LinedMap:
    result = LinedMap()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise YamlProblem(line, "a key must be a plain word, not a list or a mapping")
        if key in result:
            raise YamlProblem(
                line, f"the key {key!r} is given twice in one mapping (first at line {result.lines[key]})"
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = line
    return result


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LinedList:
    result = LinedList()
    result.line = node.start_mark.line + 1
    for item in node.value:
        result.append(loader.construct_object(item, deep=True))
        result.lines.append(item.start_mark.line + 1)
    return result


_Loader.add_constructor("tag:yaml.org,2002:map", _mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _sequence)


def _first_alias_line(text: str) -> int | None:
    """The 1-based line of the first alias, None without one (the events are read before anything is built)."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) and event.start_mark is not None:
            return int(event.start_mark.line) + 1
    return None


def load_lined(text: str) -> Any:
    """The YAML document in TEXT, its mappings LinedMap and its sequences LinedList; YamlProblem otherwise."""
    try:
        alias_line = _first_alias_line(text)
        if alias_line is not None:
            raise YamlProblem(alias_line, "YAML aliases (*name) are not allowed here: write the value out in full")
        loader = _Loader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise YamlProblem(line, f"not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(0, f"not valid YAML: {exc}") from None
