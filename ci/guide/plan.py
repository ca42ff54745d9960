"""Planning: validate parsed blocks against the contract and build an immutable plan."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from ci.guide.model import (
    DEFAULT_WILDCARD,
    LANGUAGES,
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
    closest,
)
from ci.guide.parse import NearLabel, ParsedGuide, ascii_form, full_width_language
from ci.guide.placeholders import placeholders_in, unloaded_placeholders
from ci.guide.settings import (
    DEFAULT_RETRY_DELAY_S,
    guide_settings,
    key_line,
    parse_duration,
    parse_retry,
    parse_retry_delay,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "LANGUAGES",
    "LOAD_SEPARATOR",
    "block_loads",
    "build_plan",
    "guides_without_blocks",
    "parse_duration",
    "parse_load",
]

_T = TypeVar("_T")
DEFAULT_TIMEOUT_S = 10800.0
LOAD_SEPARATOR = ">>"  # load="NAME>>PLACEHOLDER"


# Which keys each label accepts; flags take no value, the rest need a quoted one.
_KEYS = {
    Label.TEST: {"id", "load", "timeout", "skip", "retry", "retry_delay", "rerun_on_resume"},
    Label.RESULT: {"id", "load", "fuzzy", "disable_fuzzy"},
    Label.SETUP: {"id", "store", "load", "timeout", "skip", "retry", "retry_delay", "rerun_on_resume"},
}
_ALL_KEYS = set().union(*_KEYS.values())
_FLAGS = {"disable_fuzzy", "rerun_on_resume"}
_REPEATABLE = {"load", "fuzzy"}


class _Checker:
    """Collects every problem of one guide instead of stopping at the first, each mistake once."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        # Parameters refused, kept so that what follows from one mistake is not reported as another:
        # a `#test` whose id was misspelt does not also "need an id".
        self.refused: list[tuple[Block, Param]] = []
        self.test_ids: set[str] = set()
        self.results: dict[str, list[_Checked]] = {}  # the #test-result blocks by id
        self.claimed: set[str] = set()  # ids of results without a #test that an error already names
        self.near_labels: tuple[NearLabel, ...] = ()  # fences ignored for a misspelt label
        self.claimed_warnings: list[Problem] = []  # parser warnings an error already says
        self.settings = GuideSettings()  # the front matter's: ci.retry and ci.retry_delay are the blocks' defaults

    def error(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def refused_on(self, block: Block) -> bool:
        """True when a parameter of the block was refused: what it lacks may be what was refused."""
        return any(refused is block for refused, _ in self.refused)

    def refused_values(self, block: Block, key: str) -> list[str]:
        """The values of KEY refused on BLOCK, such as the second of a key given twice (`id="a" id="b"`)."""
        return [param.value or "" for refused, param in self.refused if refused is block and param.key == key]

    def may_have_been(self, label: Label, value: str) -> bool:
        """True when a refused parameter of a LABEL block held VALUE (`stor="port"`: port may be stored)."""
        return any(block.label is label and param.value == value for block, param in self.refused)

    def params(self, block: Block) -> dict[str, list[str]]:
        """Check a block's parameters; return the usable ones by key (flags map to [""])."""
        allowed = _KEYS[block.label]
        seen: dict[str, list[str]] = {}
        for param in block.params:
            problem = _param_problem(block.label, param, allowed)
            if problem is None and param.key in seen and param.key not in _REPEATABLE:
                first = Param(param.key, seen[param.key][0], param.column)
                both = f" ({_written(param.key, first)} and {_written(param.key, param)})"
                differ = param.key not in _FLAGS and param.value != seen[param.key][0]
                problem = f"{param.key!r} given twice on {block.label.value}{both if differ else ''}; keep one"
            if problem is None and param.key == "fuzzy" and param.value in seen.get("fuzzy", []):
                problem = (
                    f"fuzzy={param.value!r} given twice on {block.label.value}: each wildcard token once; keep one"
                )
            if problem is not None:
                self.error(block.line, problem)
                self.refused.append((block, param))
                continue
            if not param.quoted:  # an error, but its value is what was meant: pairing and loads go on with it
                written = f"{param.key}={param.value}"
                self.error(block.line, f"unquoted value in {written!r}: write {_written(param.key, param)}")
            seen.setdefault(param.key, []).append(param.value or "")
        if "disable_fuzzy" in seen and "fuzzy" in seen:  # on every #test-result, one without its #test included
            self.error(block.line, "disable_fuzzy conflicts with fuzzy=: keep one of them")
        return seen

    def loads(self, block: Block, values: list[str], stored: set[str]) -> tuple[Load, ...]:
        loads = []
        for value in values:
            load = parse_load(value)
            if load is None:
                self.error(
                    block.line, f'load={value!r} must read NAME>>PLACEHOLDER, with one ">>"{_load_fix(value, block)}'
                )
                continue
            if load.name not in stored:
                if not self.may_have_been(Label.SETUP, load.name):  # else its refused store says it all
                    self.error(block.line, _not_stored(load, stored))
                continue
            loads.append(load)
        return tuple(loads)

    def value(self, block: Block, params: dict[str, list[str]], key: str, parse: Callable[[str], _T]) -> _T | None:
        """The block's KEY= read by PARSE (timeout, retry, retry_delay); None when not given or bad (a problem then)."""
        try:
            return parse(params[key][0]) if key in params else None
        except ValueError as exc:
            self.error(block.line, f"{key}: {exc}")
            return None

    def retry(self, block: Block, params: dict[str, list[str]]) -> tuple[int, float]:
        """The block's retries and the pause before each: its own retry=/retry_delay=, else the front matter's."""
        retry = self.value(block, params, "retry", parse_retry)
        delay_s = self.value(block, params, "retry_delay", parse_retry_delay)
        if "retry_delay" in params and "retry" not in params and not self.settings.retry:  # retry="0": it is meant
            why = 'has no effect: it is retried only with retry="N" (or ci.retry); add one, or remove retry_delay='
            self.warnings.append(Problem(self.file, block.line, f"retry_delay= on this {block.label.value} {why}"))
        delay_s = self.settings.retry_delay_s if delay_s is None else delay_s
        retry = self.settings.retry or 0 if retry is None else retry
        return retry, DEFAULT_RETRY_DELAY_S if delay_s is None else delay_s

    def language(self, block: Block) -> Language | None:
        if block.language is None:
            self.error(
                block.line,
                f"{block.label.value} needs a language before the label: ```shell {block.label.value} or ```python {block.label.value}",
            )
            return None
        language = LANGUAGES.get(block.language.lower())
        typed = ascii_form(block.language)
        if language is None and typed != block.language and typed.lower() in LANGUAGES:
            fence = f"{typed} {block.label.value}"
            self.error(block.line, full_width_language(block.language, fence, "it is no language the harness runs"))
        elif language is None:
            meant = closest(block.language, LANGUAGES)
            guess = f"did you mean {meant}? " if meant else ""
            self.error(block.line, f"unsupported language {block.language!r}; {guess}use one of {_list(LANGUAGES)}")
        return language


def _param_problem(label: Label, param: Param, allowed: set[str]) -> str | None:
    """What is wrong with one parameter as written, with the fix; None when it can be used."""
    key = param.key
    if key not in allowed:
        if key in _ALL_KEYS:
            return f"{key!r} is not allowed on {label.value}; allowed: {_list(allowed)}"
        meant = closest(key, allowed)
        guess = f"did you mean {_written(meant, param)}? " if meant else ""
        return f"unknown parameter {key!r} on {label.value}; {guess}allowed: {_list(allowed)}"
    if key in _FLAGS:
        return None if param.value is None else f"{key} is a flag and takes no value: write {key} alone"
    if param.value is None:
        return f'{key!r} needs a quoted value: {key}="..."'
    if param.value == "" and (key != "skip" or not param.quoted):  # `skip=""` skips with no reason; `skip=` is a slip
        return (
            f"{key!r} has an empty value: give it one"
            + ("" if key == "id" and label is not Label.SETUP else f", or leave {key}= out")
            if param.quoted
            else f'{key}= has no value: write {key}="..."'
        )
    return None


def _written(key: str, param: Param) -> str:
    """PARAM as it should be written under KEY: `key="value"` (single quotes when the value holds `"`), or a flag."""
    if param.value is None or key in _FLAGS:
        return key
    quote = "'" if '"' in param.value else '"'
    return f"{key}={quote}{param.value or '...'}{quote}"


def _load_fix(value: str, block: Block) -> str:
    """The load a malformed `load=VALUE` of BLOCK most likely meant, written out: `port` or `port>P` as
    `load="port>>P"`, P being the one `<P>` of the block's body (else PLACEHOLDER, said so)."""
    if value.count(LOAD_SEPARATOR) > 1:
        return ', e.g. load="model_path>>MODEL_PATH"'
    parts = [part.strip(" <>") for part in _LOAD_ARROW.split(value, maxsplit=1)]
    name, placeholder = parts[0], parts[1] if len(parts) > 1 else ""
    if not placeholder and value.strip().startswith("<"):
        name, placeholder = "", name  # `load="<P>"`: only the placeholder was given
    found = placeholders_in(block.body)
    placeholder = placeholder or (found[0] if len(found) == 1 else "")
    meant = f'load="{name or "NAME"}{LOAD_SEPARATOR}{placeholder or "PLACEHOLDER"}"'
    if not name:
        return f": write {meant}, NAME being the name an earlier block stores"
    return f": write {meant}" + ("" if placeholder else ", PLACEHOLDER being the <PLACEHOLDER> of the body to replace")


_LOAD_ARROW = re.compile(r"\s*[-=]?>+\s*")  # how a load's `>>` is mistyped: `>`, `->`, `=>`


def _not_stored(load: Load, stored: set[str]) -> str:
    """Why a load cannot be planned (no earlier block stores its name), with the fix."""
    known = _list(stored) if stored else "none yet"
    meant = closest(load.name, stored)
    fix = f'did you mean load="{meant}{LOAD_SEPARATOR}{load.placeholder}"? Else add' if meant else "add"
    return (
        f"load of {load.name!r}, which no earlier block stores (stored so far: {known}); "
        f'{fix} a #test-setup store="{load.name}" above, or pass --set {load.name}=VALUE'
    )


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
    checker.near_labels = parsed.near_labels
    settings, settings_problems = guide_settings(parsed)
    checker.settings = settings
    checker.problems.extend(settings_problems)
    if settings.timeout_rules:  # they reach only the plain dialects: said, never silently ignored
        fix = "give ci.dialect: fences (or pycon) if the guide is written so, else a block's limit with timeout="
        message = f"ci.timeout_rules sets limits by command kind for the plain dialects, and this guide is read as labelled blocks, so the rules are ignored: {fix}"
        checker.warnings.append(Problem(parsed.file, key_line(parsed, "timeout_rules"), message))
    checked = [(block, checker.params(block)) for block in parsed.blocks]
    _pair_by_id(checked, checker)
    block_default_s = settings.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S
    steps = _steps(checked, set(preset_names), block_default_s, checker)
    _warn_of_unpaired_results(checker)
    problems = sorted([*parsed.problems, *checker.problems], key=lambda p: p.line)
    if not problems:  # on a guide that plans: what is left of an error would be a consequence of it
        checker.warnings.extend(unloaded_placeholders(steps, preset_names))
    parser_warnings = [w for w in parsed.warnings if w not in checker.claimed_warnings]
    warnings = tuple(sorted([*parser_warnings, *checker.warnings], key=lambda p: p.line))
    if problems:
        raise DocumentError(problems, warnings)
    return Plan(guide=parsed.file, source_path=source_path, steps=tuple(steps), settings=settings, warnings=warnings)


_Checked = tuple[Block, dict[str, list[str]]]  # a block and its valid parameters by key


def _pair_by_id(checked: list[_Checked], checker: _Checker) -> None:
    """Note the #test ids and the #test-result blocks by id; each missing or duplicate id is a problem."""
    seen_ids: dict[tuple[Label, str], int] = {}
    for block, params in checked:
        block_id = params.get("id", [None])[0]
        if block_id is None:
            if block.label is not Label.SETUP and not checker.refused_on(block):  # a refused id= says it all
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
            checker.test_ids.add(block_id)
        elif block.label is Label.RESULT:
            checker.results.setdefault(block_id, []).append((block, params))


def _unpaired(result_id: str, checker: _Checker) -> bool:
    """Whether no #test has RESULT_ID, and no error already names the one that was meant."""
    if result_id in checker.test_ids or result_id in checker.claimed:
        return False
    if checker.may_have_been(Label.TEST, result_id):  # the #test's id was refused: that error says it all
        return False
    if any(block.label is Label.TEST and param.key == "id" and not param.value for block, param in checker.refused):
        return False  # a #test's id was left empty (`id="`): this result is most likely the one meant for it
    blocks = [block for block, _ in checker.results.get(result_id, [])]
    if any(other in checker.test_ids for block in blocks for other in checker.refused_values(block, "id")):
        return False  # `id="b" id="a"` on the result of #test "a": the id given twice says it all
    return not any(near.block_id == result_id for near in checker.near_labels)  # its #test's label is misspelt


def _warn_of_unpaired_results(checker: _Checker) -> None:
    """A warning for each #test-result whose id no #test has, unless an error already names it."""
    for result_id, found in checker.results.items():
        if not _unpaired(result_id, checker):
            continue
        message = f"#test-result id={result_id!r} has no #test with that id; it is ignored"
        checker.warnings.append(Problem(checker.file, found[0][0].line, message))


def _steps(checked: list[_Checked], stored: set[str], block_default_s: float, checker: _Checker) -> list[Step]:
    """The runnable blocks as steps, in order; `stored` (the names preset) grows with each setup's store."""
    steps: list[Step] = []
    for block, params in checked:
        if block.label is Label.RESULT:
            result_id = params.get("id", [None])[0]
            if result_id is not None and _unpaired(
                result_id, checker
            ):  # ignored, but its loads are read where it stands
                checker.loads(block, params.get("load", []), stored)
            continue
        language = checker.language(block)
        if not block.body.strip():
            fix = "write the command to run in it, or remove the block"
            checker.error(block.line, f"this {block.label.value} has an empty body: {fix}")
        loads = checker.loads(block, params.get("load", []), stored)
        timeout_s = checker.value(block, params, "timeout", parse_duration)
        retry, retry_delay_s = checker.retry(block, params)
        block_id = params.get("id", [None])[0]
        expected = None
        if block.label is Label.TEST and block_id is not None:
            expected = _expected(block, block_id, stored, checker)
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
                retry=retry,
                retry_delay_s=retry_delay_s,
                rerun_on_resume="rerun_on_resume" in params,
            )
        )
    return steps


def _expected(test: Block, test_id: str, stored: set[str], checker: _Checker) -> Expected | None:
    found = checker.results.get(test_id)
    if not found:
        _no_result(test, test_id, checker)
        return None
    block, params = found[0]
    fuzzy = params.get("fuzzy", [])
    tokens: tuple[str, ...] = ()
    if "disable_fuzzy" not in params:
        tokens = tuple(fuzzy) if fuzzy else (DEFAULT_WILDCARD,)
    # The result's loads are substituted when its #test runs, so they count from there.
    loads = checker.loads(block, params.get("load", []), stored)
    return Expected(body=block.body, fuzzy=tokens, loads=loads, line=block.line)


def _no_result(test: Block, test_id: str, checker: _Checker) -> None:
    """The error of a #test without its #test-result, naming the unpaired result whose id is most like its own."""
    if checker.may_have_been(Label.RESULT, test_id):  # the result's id was refused: that error says it all
        return
    if any(other in checker.results for other in checker.refused_values(test, "id")):
        return  # `id="b" id="a"` on the #test of result "a": the id given twice says it all
    near = next((near for near in checker.near_labels if near.block_id == test_id), None)
    if near is not None and near.error:  # its result's label is a near miss, an error that says it all
        return
    if near is not None:  # its result's label is misspelt: this error says it, in place of the label's warning
        checker.claimed_warnings.append(near.problem)
        guess = f"; did you mean {near.meant}?" if near.meant else ""
        message = f"the block at line {near.line} has id={test_id!r} but is labelled {near.word!r}, so it is ignored"
        checker.error(test.line, f"#test id={test_id!r} has no #test-result: {message}{guess}")
        return
    unpaired = [result_id for result_id in checker.results if result_id not in checker.test_ids]
    meant = closest(test_id, [result_id for result_id in unpaired if result_id not in checker.claimed])
    fix = "add one with the expected stdout"
    if meant is not None:
        checker.claimed.add(meant)
        line = checker.results[meant][0][0].line
        fix = f"did you mean the #test-result id={meant!r} at line {line}? Give both the same id"
    checker.error(test.line, f"#test id={test_id!r} has no #test-result id={test_id!r}; {fix}")


def guides_without_blocks(plans: Sequence[Plan]) -> list[Problem]:
    """A problem for each plan with no #test or #test-setup block: such a guide checks nothing, so it cannot pass."""
    return [
        Problem(
            plan.guide,
            0,
            "no runnable block, so there is nothing to check: label a command block ```shell #test-setup, "
            "or ```shell #test with a #test-result of the same id (a near miss of a label such as #tset is"
            " an error of its own, a farther word such as #testing is ignored with a warning);"
            " a guide written without labels is read with --dialect fences (every ```shell fence runs) or --dialect"
            " pycon (its ```pycon session runs)",
        )
        for plan in plans
        if not plan.steps
    ]


def parse_load(value: str) -> Load | None:
    """A `load="NAME>>PLACEHOLDER"` value as a Load; None when a side is empty or `>>` is not there exactly once."""
    name, separator, placeholder = value.partition(LOAD_SEPARATOR)
    if LOAD_SEPARATOR in placeholder:  # `a>>b>>c`: the reference engine refuses it too
        return None
    return Load(name, placeholder) if separator and name and placeholder else None


def block_loads(block: Block) -> list[Load]:
    """The well-formed loads a parsed block names, in order (planning reports the others)."""
    loads = (parse_load(p.value) for p in block.params if p.key == "load" and p.value is not None)
    return [load for load in loads if load is not None]
