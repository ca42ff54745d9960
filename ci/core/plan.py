"""Planning: validate parsed blocks against the contract and build an immutable plan."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from ci.core.match import DEFAULT_WILDCARD
from ci.core.model import (
    Block,
    DocumentError,
    Expected,
    GuideSettings,
    Label,
    Language,
    Load,
    Param,
    Plan,
    Problem,
    Step,
)
from ci.core.parse import ParsedGuide

__all__ = ["DEFAULT_TIMEOUT_S", "LANGUAGES", "build_plan", "parse_duration", "select_steps", "substitute"]

DEFAULT_TIMEOUT_S = 10800.0

LANGUAGES = {
    "shell": Language.SHELL,
    "bash": Language.SHELL,
    "sh": Language.SHELL,
    "python": Language.PYTHON,
    "python3": Language.PYTHON,
}

# Which keys each label accepts; flags take no value, the rest need a quoted one.
_KEYS = {
    Label.TEST: {"id", "load", "timeout", "skip"},
    Label.RESULT: {"id", "load", "fuzzy", "disable_fuzzy"},
    Label.SETUP: {"id", "store", "load", "timeout", "skip"},
}
_ALL_KEYS = set().union(*_KEYS.values())
_FLAGS = {"disable_fuzzy"}
_REPEATABLE = {"load", "fuzzy"}
_FRONT_MATTER_KEYS = {"timeout", "error_markers", "env", "upstream", "collect", "diagnostics", "diagnostics_timeout"}
# the front-matter lists of text, with what an item is and an example for messages
_TEXT_LISTS = {
    "collect": ("a glob", '["/tmp/server-*.log", "~/app/log/*.txt"]'),
    "diagnostics": ("a command", '["npu-smi info", "tail -n 100 /tmp/server.log"]'),
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)\Z")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from `90`, `30s`, `10m`, `3h` (decimals allowed); ValueError otherwise."""
    found = _DURATION.match(str(text).strip())
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"bad duration {text!r}: use seconds (90) or a unit: 30s, 10m, 3h")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


class _Checker:
    """Collects every problem of one guide instead of stopping at the first."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def params(self, block: Block) -> dict[str, list[str]]:
        """Check a block's parameters; return the valid ones by key (flags map to [""])."""
        allowed = _KEYS[block.label]
        seen: dict[str, list[str]] = {}
        for param in block.params:
            if param.key not in _ALL_KEYS:
                self.error(
                    block.line, f"unknown parameter {param.key!r} on {block.label.value}; allowed: {_list(allowed)}"
                )
                continue
            if param.key not in allowed:
                self.error(
                    block.line, f"{param.key!r} is not allowed on {block.label.value}; allowed: {_list(allowed)}"
                )
                continue
            if not self.param_shape(block, param):
                continue
            if param.key in seen and param.key not in _REPEATABLE:
                self.error(block.line, f"{param.key!r} given twice on {block.label.value}; keep one")
                continue
            seen.setdefault(param.key, []).append(param.value or "")
        return seen

    def param_shape(self, block: Block, param: Param) -> bool:
        if param.key in _FLAGS:
            if param.value is not None:
                self.error(block.line, f"{param.key} is a flag and takes no value: write {param.key} alone")
                return False
            return True
        if param.value is None:
            self.error(block.line, f'{param.key!r} needs a quoted value: {param.key}="..."')
            return False
        if param.value == "" and param.key != "skip":
            self.error(block.line, f"{param.key!r} has an empty value")
            return False
        return True

    def loads(self, block: Block, values: list[str], stored: set[str]) -> tuple[Load, ...]:
        loads = []
        for value in values:
            name, separator, placeholder = value.partition(">>")
            if not separator or not name or not placeholder:
                self.error(
                    block.line, f'load={value!r} must read NAME>>PLACEHOLDER, e.g. load="model_path>>MODEL_PATH"'
                )
                continue
            if name not in stored:
                known = _list(stored) if stored else "none yet"
                self.error(
                    block.line,
                    f"load of {name!r}, which no earlier block stores (stored so far: {known}); "
                    f'add a #test-setup store="{name}" above, or pass --set {name}=VALUE',
                )
                continue
            loads.append(Load(name, placeholder))
        return tuple(loads)

    def timeout(self, block: Block, values: list[str]) -> float | None:
        if not values:
            return None
        try:
            return parse_duration(values[0])
        except ValueError as exc:
            self.error(block.line, f"timeout: {exc}")
            return None

    def language(self, block: Block) -> Language | None:
        if block.language is None:
            self.error(
                block.line,
                f"{block.label.value} needs a language before the label: ```shell {block.label.value} or ```python {block.label.value}",
            )
            return None
        language = LANGUAGES.get(block.language.lower())
        if language is None:
            self.error(block.line, f"unsupported language {block.language!r}; use one of {_list(LANGUAGES)}")
        return language


def _list(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _settings(parsed: ParsedGuide, checker: _Checker) -> GuideSettings:
    if parsed.front_matter is None:
        return GuideSettings()
    line = parsed.front_matter_line
    try:
        data = yaml.safe_load(parsed.front_matter)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = line + 1 + mark.line if mark is not None else line
        checker.error(at, f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}")
        return GuideSettings()
    if not isinstance(data, dict) or data.get("ci") is None:
        return GuideSettings()
    key_lines = _key_lines(parsed.front_matter, line)
    section: Any = data["ci"]
    if not isinstance(section, dict):
        checker.error(key_lines.get("", line), f"front matter: 'ci' must be a mapping ({_list(_FRONT_MATTER_KEYS)})")
        return GuideSettings()

    def line_of(key: str) -> int:
        return key_lines.get(key, line)

    for key in section:
        if key not in _FRONT_MATTER_KEYS:
            checker.error(
                line_of(str(key)), f"front matter: unknown key ci.{key}; allowed: {_list(_FRONT_MATTER_KEYS)}"
            )
    timeout_s = None
    if section.get("timeout") is not None:
        try:
            timeout_s = parse_duration(str(section["timeout"]))
        except ValueError as exc:
            checker.error(line_of("timeout"), f"front matter ci.timeout: {exc}")
    markers = section.get("error_markers") or []
    if isinstance(markers, str):
        markers = [markers]
    if not isinstance(markers, list) or not all(isinstance(m, (str, int)) and str(m) for m in markers):
        checker.error(line_of("error_markers"), "front matter ci.error_markers must be a list of non-empty strings")
        markers = []
    env = section.get("env") or {}
    if not isinstance(env, dict) or any(isinstance(v, (dict, list)) for v in env.values()):
        checker.error(line_of("env"), 'front matter ci.env must map names to plain values, e.g. PYTHONUNBUFFERED: "1"')
        env = {}
    upstream = section.get("upstream") or {}
    if not isinstance(upstream, dict):
        checker.error(
            line_of("upstream"), "front matter ci.upstream must be a mapping, e.g. {repo: owner/name, model: org/model}"
        )
        upstream = {}
    diagnostics_timeout_s = None
    if section.get("diagnostics_timeout") is not None:
        try:
            diagnostics_timeout_s = parse_duration(str(section["diagnostics_timeout"]))
        except ValueError as exc:
            checker.error(line_of("diagnostics_timeout"), f"front matter ci.diagnostics_timeout: {exc}")
    return GuideSettings(
        timeout_s=timeout_s,
        error_markers=tuple(str(m) for m in markers),
        env={str(k): "" if v is None else _yaml_scalar(v) for k, v in env.items()},
        upstream={str(k): str(v) for k, v in upstream.items()},
        collect=_text_list(section, "collect", key_lines, line, checker),
        diagnostics=_text_list(section, "diagnostics", key_lines, line, checker),
        diagnostics_timeout_s=diagnostics_timeout_s,
    )


def _text_list(
    section: dict[Any, Any], key: str, key_lines: dict[str, int], front_matter_line: int, checker: _Checker
) -> tuple[str, ...]:
    """A front-matter list of non-empty strings (ci.collect, ci.diagnostics); each bad item is a document error."""
    what, example = _TEXT_LISTS[key]
    key_line = key_lines.get(key, front_matter_line)
    value = section.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        fix = f"write it as a list: {key}: [{_quoted(value)}]" if isinstance(value, str) else f"e.g. {key}: {example}"
        checker.error(key_line, f"front matter ci.{key} must be a list of strings, {what} per item; {fix}")
        return ()
    items = []
    for index, item in enumerate(value):
        at = key_lines.get(f"{key}[{index}]", key_line)
        where = f"front matter ci.{key}: item {index + 1}"
        if isinstance(item, str) and item.strip():
            items.append(item)
        elif isinstance(item, str) or item is None:
            checker.error(at, f"{where} is empty; give {what} or remove the item")
        elif isinstance(item, dict):
            # `- echo a: b` is a mapping to YAML: a colon and a space end a key
            text = ", ".join(f"{k}: {v}" for k, v in item.items())
            checker.error(at, f"{where} reads as a mapping, not as {what}: quote it, e.g. - {_quoted(text)}")
        elif isinstance(item, list):
            checker.error(at, f"{where} is a nested list; give each {what.split()[-1]} as an item of its own")
        elif isinstance(item, bool):
            checker.error(at, f"{where} reads as {str(item).lower()} (YAML's yes/no/on/off/true/false): quote it")
        else:
            kind = "the number" if isinstance(item, (int, float)) else "the value"
            checker.error(at, f"{where} reads as {kind} {item}, not {what}: quote it, e.g. - {_quoted(str(item))}")
    return tuple(items)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
                if isinstance(sub_value, yaml.SequenceNode):  # "collect[0]": the line of a list's first item
                    for index, item in enumerate(sub_value.value):
                        lines[f"{sub_key.value}[{index}]"] = opening_line + 1 + item.start_mark.line
    return lines


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):  # YAML's true/false, as a shell would want them
        return "true" if value else "false"
    return str(value)


def build_plan(
    parsed: ParsedGuide,
    *,
    preset_names: Iterable[str] = (),
    default_timeout_s: float | None = None,
    source_path: str | None = None,
) -> Plan:
    """Validate a parsed guide and build its plan; raise DocumentError listing every problem."""
    checker = _Checker(parsed.file)
    settings = _settings(parsed, checker)
    block_default_s = settings.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S

    checked = [(block, checker.params(block)) for block in parsed.blocks]
    tests: dict[str, Block] = {}
    results: dict[str, list[tuple[Block, dict[str, list[str]]]]] = {}
    seen_ids: dict[tuple[Label, str], int] = {}
    for block, params in checked:
        block_id = params.get("id", [None])[0]
        if block_id is None:
            if block.label is not Label.SETUP:
                checker.error(block.line, f'{block.label.value} needs an id: id="..."')
            continue
        key = (block.label, block_id)
        if key in seen_ids:
            checker.error(
                block.line,
                f"duplicate {block.label.value} id={block_id!r} (first at line {seen_ids[key]}); ids are unique per label",
            )
            continue
        seen_ids[key] = block.line
        if block.label is Label.TEST:
            tests[block_id] = block
        elif block.label is Label.RESULT:
            results.setdefault(block_id, []).append((block, params))

    for result_id, found in results.items():
        if result_id not in tests:
            checker.warnings.append(
                Problem(
                    parsed.file,
                    found[0][0].line,
                    f"#test-result id={result_id!r} has no #test with that id; it is ignored",
                )
            )

    stored: set[str] = set(preset_names)
    steps: list[Step] = []
    for block, params in checked:
        if block.label is Label.RESULT:
            continue
        language = checker.language(block)
        loads = checker.loads(block, params.get("load", []), stored)
        timeout_s = checker.timeout(block, params.get("timeout", []))
        block_id = params.get("id", [None])[0]
        expected = None
        if block.label is Label.TEST and block_id is not None:
            expected = _expected(block, block_id, results, stored, checker)
        if block.label is Label.SETUP and "store" in params:
            stored.add(params["store"][0])
        if language is None:
            continue
        steps.append(
            Step(
                ordinal=len(steps) + 1,
                label=block.label,
                id=block_id,
                store=params.get("store", [None])[0],
                language=language,
                language_word=block.language or "",
                body=block.body,
                file=block.file,
                line=block.line,
                heading=block.heading,
                hidden=block.hidden,
                timeout_s=timeout_s or block_default_s,
                loads=loads,
                skip_reason=params["skip"][0] or "skipped" if "skip" in params else None,
                expected=expected,
            )
        )

    problems = sorted([*parsed.problems, *checker.problems], key=lambda p: p.line)
    warnings = tuple(sorted([*parsed.warnings, *checker.warnings], key=lambda p: p.line))
    if problems:
        raise DocumentError(problems, warnings)
    return Plan(
        guide=parsed.file,
        source_path=source_path,
        steps=tuple(steps),
        settings=settings,
        warnings=warnings,
    )


def _expected(
    test: Block,
    test_id: str,
    results: dict[str, list[tuple[Block, dict[str, list[str]]]]],
    stored: set[str],
    checker: _Checker,
) -> Expected | None:
    found = results.get(test_id)
    if not found:
        checker.error(
            test.line, f"#test id={test_id!r} has no #test-result id={test_id!r}; add one with the expected stdout"
        )
        return None
    block, params = found[0]
    fuzzy = params.get("fuzzy", [])
    if "disable_fuzzy" in params and fuzzy:
        checker.error(block.line, "disable_fuzzy conflicts with fuzzy=: keep one of them")
    tokens: tuple[str, ...] = ()
    if "disable_fuzzy" not in params:
        tokens = tuple(fuzzy) if fuzzy else (DEFAULT_WILDCARD,)
    # The result's loads are substituted when its #test runs, so they count from there.
    loads = checker.loads(block, params.get("load", []), stored)
    return Expected(body=block.body, fuzzy=tokens, loads=loads, line=block.line)


def select_steps(
    plans: Sequence[Plan],
    *,
    only: Sequence[str] = (),
    start: str | None = None,
    until: str | None = None,
) -> list[dict[int, str]]:
    """Decide which steps of each plan run.

    Returns, per plan, the ordinals left out with the reason. An ID is an id, a
    store name or an ordinal; one that names no block of any plan is a
    DocumentError.
    """

    def hits(plan: Plan, ident: str) -> list[int]:
        return [s.ordinal for s in plan.steps if ident in (s.id, s.store, str(s.ordinal))]

    problems = [
        Problem(
            "command line", 0, f"{flag} {ident!r} names no block (use an id, a store name or an ordinal; see --list)"
        )
        for flag, idents in (
            ("--only", only),
            ("--from", [start] if start else []),
            ("--until", [until] if until else []),
        )
        for ident in idents
        if not any(hits(plan, ident) for plan in plans)
    ]
    if problems:
        raise DocumentError(problems)
    left_out: list[dict[int, str]] = []
    for plan in plans:
        reasons: dict[int, str] = {}
        wanted = {o for ident in only for o in hits(plan, ident)}
        first = min(hits(plan, start), default=None) if start else None
        last = max(hits(plan, until), default=None) if until else None
        for step in plan.steps:
            if only and step.ordinal not in wanted:
                reasons[step.ordinal] = "not selected by --only"
            elif start and (first is None or step.ordinal < first):
                reasons[step.ordinal] = f"before --from {start}"
            elif until and (last is None or step.ordinal > last):
                reasons[step.ordinal] = f"after --until {until}"
        left_out.append(reasons)
    return left_out


def substitute(text: str, loads: tuple[tuple[str, str], ...]) -> str:
    """Replace every `<PH>` by its value; loads are (placeholder, value) pairs, applied in order."""
    for placeholder, value in loads:
        text = text.replace(f"<{placeholder}>", value)
    return text
