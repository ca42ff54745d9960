"""Planning: validate parsed blocks against the contract and build an immutable plan."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ci.core.match import DEFAULT_WILDCARD
from ci.core.model import (
    Block,
    DocumentError,
    Expected,
    Label,
    Language,
    Load,
    Param,
    Plan,
    Problem,
    Step,
)
from ci.core.parse import ParsedGuide
from ci.core.settings import guide_settings, parse_duration

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "LANGUAGES",
    "LOAD_SEPARATOR",
    "block_loads",
    "build_plan",
    "guides_without_blocks",
    "only_idents",
    "parse_duration",
    "parse_load",
    "select_steps",
    "substitute",
    "written_line",
]

DEFAULT_TIMEOUT_S = 10800.0
LOAD_SEPARATOR = ">>"  # load="NAME>>PLACEHOLDER"

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
            load = parse_load(value)
            if load is None:
                self.error(
                    block.line, f'load={value!r} must read NAME>>PLACEHOLDER, e.g. load="model_path>>MODEL_PATH"'
                )
                continue
            if load.name not in stored:
                known = _list(stored) if stored else "none yet"
                self.error(
                    block.line,
                    f"load of {load.name!r}, which no earlier block stores (stored so far: {known}); "
                    f'add a #test-setup store="{load.name}" above, or pass --set {load.name}=VALUE',
                )
                continue
            loads.append(load)
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


def build_plan(
    parsed: ParsedGuide,
    *,
    preset_names: Iterable[str] = (),
    default_timeout_s: float | None = None,
    source_path: str | None = None,
) -> Plan:
    """Validate a parsed guide and build its plan; raise DocumentError listing every problem."""
    checker = _Checker(parsed.file)
    settings, settings_problems = guide_settings(parsed)
    checker.problems.extend(settings_problems)
    checked = [(block, checker.params(block)) for block in parsed.blocks]
    results = _results_by_id(parsed.file, checked, checker)
    block_default_s = settings.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S
    steps = _steps(checked, results, set(preset_names), block_default_s, checker)
    problems = sorted([*parsed.problems, *checker.problems], key=lambda p: p.line)
    warnings = tuple(sorted([*parsed.warnings, *checker.warnings], key=lambda p: p.line))
    if problems:
        raise DocumentError(problems, warnings)
    return Plan(guide=parsed.file, source_path=source_path, steps=tuple(steps), settings=settings, warnings=warnings)


_Checked = tuple[Block, dict[str, list[str]]]  # a block and its valid parameters by key


def _results_by_id(file: str, checked: list[_Checked], checker: _Checker) -> dict[str, list[_Checked]]:
    """The #test-result blocks by id; each missing or duplicate id is a problem, each result without its #test a warning."""
    tests: dict[str, Block] = {}
    results: dict[str, list[_Checked]] = {}
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
            message = f"#test-result id={result_id!r} has no #test with that id; it is ignored"
            checker.warnings.append(Problem(file, found[0][0].line, message))
    return results


def _steps(
    checked: list[_Checked],
    results: dict[str, list[_Checked]],
    stored: set[str],
    block_default_s: float,
    checker: _Checker,
) -> list[Step]:
    """The runnable blocks as steps, in order; `stored` (the names preset) grows with each setup's store."""
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
    return steps


def _expected(
    test: Block,
    test_id: str,
    results: dict[str, list[_Checked]],
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
    if all(len(reasons) == len(plan.steps) for plan, reasons in zip(plans, left_out, strict=True)):
        flags = " ".join(
            f"{flag} {value}"
            for flag, value in (("--only", ",".join(only)), ("--from", start), ("--until", until))
            if value
        )
        message = f"{flags} selects no block to run; see --list for the blocks in their order"
        raise DocumentError([Problem("command line", 0, message)])
    return left_out


def only_idents(values: Sequence[str], plans: Sequence[Plan]) -> list[str]:
    """The names the `--only` values give: a value that names a block whole is that name, any other is split at commas.

    So `--only a,b` still selects a and b, and an id that holds a comma is selected by giving it alone.
    """
    names = {name for plan in plans for step in plan.steps for name in (step.id, step.store, str(step.ordinal))}
    idents: list[str] = []
    for value in values:
        parts = [value] if value in names else [part.strip() for part in value.split(",")]
        idents.extend(part for part in parts if part)
    return idents


def guides_without_blocks(plans: Sequence[Plan]) -> list[Problem]:
    """A problem for each plan with no #test or #test-setup block: such a guide checks nothing, so it cannot pass."""
    return [
        Problem(
            plan.guide,
            0,
            "no runnable block, so there is nothing to check: label a command block ```shell #test-setup, "
            "or ```shell #test with a #test-result of the same id (a misspelt label is ignored, with a warning)",
        )
        for plan in plans
        if not plan.steps
    ]


def parse_load(value: str) -> Load | None:
    """A `load="NAME>>PLACEHOLDER"` value as a Load, split at the first `>>`; None when a side is empty."""
    name, separator, placeholder = value.partition(LOAD_SEPARATOR)
    return Load(name, placeholder) if separator and name and placeholder else None


def block_loads(block: Block) -> list[Load]:
    """The well-formed loads a parsed block names, in order (planning reports the others)."""
    loads = (parse_load(p.value) for p in block.params if p.key == "load" and p.value is not None)
    return [load for load in loads if load is not None]


def substitute(text: str, loads: tuple[tuple[str, str], ...]) -> str:
    """Replace every `<PH>` by its value; loads are (placeholder, value) pairs, applied in order."""
    for placeholder, value in loads:
        text = text.replace(f"<{placeholder}>", value)
    return text


def written_line(text: str, loads: tuple[tuple[str, str], ...], line: int) -> int:
    """The line of TEXT (1-based) that line LINE of its substitution comes from: a value may span lines."""
    written = text.split("\n")
    reached = 0
    for number, each in enumerate(written, start=1):
        reached += substitute(each, loads).count("\n") + 1
        if line <= reached:
            return number
    return len(written)
