"""The Python-console dialect: the first `pycon` fence's `>>> ` statements run as one Python program.

A superset of the reference project's transformers guard: `>>> ` opens a
statement, `... ` continues it, bare `>>>` and `...` lines are ignored; any
other line after a statement is that statement's expected output (as a doctest
reads it), and a statement without output lines, or with a bare `...`, may print
anything. The statements run as the interactive console runs them (an
expression's value is printed), in one process, as one ordinary python step;
its stdout is matched whole against the outputs given, each statement without
one standing for any text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ci.core.dialects.fences_scan import heading_above, scan_fences, timeout_by_kind
from ci.core.match import DEFAULT_WILDCARD
from ci.core.model import DocumentError, Expected, GuideSettings, Label, Language, Plan, Problem, Step, TimeoutRule

__all__ = ["CONSOLE_LANGUAGE", "Statement", "console_statements", "has_console", "plan_console"]

CONSOLE_LANGUAGE = "pycon"
_PROMPT = ">>> "
_CONTINUATION = "... "
# Runs each statement as the console does ("single": an expression's value is printed), falling back to a
# whole program for text the console would refuse as one statement; an exception ends the program with it.
_PROGRAM = """\
_statements = {statements!r}
_names = {{"__name__": "__main__"}}
for _line, _source in _statements:
    _where = {file!r} + ":" + str(_line)
    try:
        _code = compile(_source + "\\n", _where, "single")
    except SyntaxError:
        _code = compile(_source + "\\n", _where, "exec")
    exec(_code, _names)
"""


@dataclass(frozen=True)
class Statement:
    """One `>>> ` statement with its continuation lines and the output lines the guide gives after it."""

    line: int  # 1-based line of its `>>> `
    source: str  # the statement without its prompts
    output: tuple[str, ...]  # the output lines as written; () or ("...",) for any output


def has_console(lines: Sequence[str]) -> bool:
    """Whether the text holds a `pycon` fence."""
    return any(fence.language == CONSOLE_LANGUAGE for fence in scan_fences(lines))


def console_statements(lines: Sequence[str], file: str) -> list[Statement]:
    """The statements of the first `pycon` fence as the plan runs them (the lines it cannot read left out): what the
    drift check compiles and compares."""
    fence = next((each for each in scan_fences(lines) if each.language == CONSOLE_LANGUAGE), None)
    return [] if fence is None else _statements(fence.body.split("\n"), fence.line + 1, file)[0]


def plan_console(
    lines: Sequence[str],
    file: str,
    settings: GuideSettings,
    *,
    default_s: float,
    rules: Sequence[TimeoutRule],
    source_path: str | None,
) -> Plan:
    """The plan of a Python-console guide: one python step; DocumentError for a line that is neither prompt nor output."""
    fences = scan_fences(lines)
    fence = next((each for each in fences if each.language == CONSOLE_LANGUAGE), None)
    if fence is None:
        raise DocumentError([Problem(file, 0, "no ```pycon fence: write the console session in one")])
    statements, problems = _statements(fence.body.split("\n"), fence.line + 1, file)
    if not statements and not problems:
        problems.append(Problem(file, fence.line, "the ```pycon fence holds no '>>> ' statement"))
    if problems:
        raise DocumentError(problems)
    program = _PROGRAM.format(statements=[(each.line, each.source) for each in statements], file=file)
    expected_body = _expected_body(statements)
    expected = None
    if expected_body is not None:
        expected = Expected(body=expected_body, fuzzy=(DEFAULT_WILDCARD,), loads=(), line=fence.line)
    step = Step(
        ordinal=1,
        label=Label.TEST if expected else Label.SETUP,
        id=None,
        store=None,
        language=Language.PYTHON,
        language_word=CONSOLE_LANGUAGE,
        body=program,
        file=file,
        line=fence.line,
        heading=heading_above(lines, fences, fence.line),
        hidden=False,
        timeout_s=timeout_by_kind("\n".join(each.source for each in statements), rules, default_s),
        loads=(),
        skip_reason=None,
        expected=expected,
    )
    return Plan(guide=file, source_path=source_path, steps=(step,), settings=settings)


def _statements(body_lines: Sequence[str], first_line: int, file: str) -> tuple[list[Statement], list[Problem]]:
    statements: list[Statement] = []
    problems: list[Problem] = []
    for number, text in enumerate(body_lines, first_line):
        if text.startswith(_PROMPT):
            statements.append(Statement(number, text[len(_PROMPT) :], ()))
        elif text.startswith(_CONTINUATION) and statements and not statements[-1].output:
            last = statements[-1]
            statements[-1] = Statement(last.line, f"{last.source}\n{text[len(_CONTINUATION) :]}", ())
        elif text.strip() == _PROMPT.strip() or not text.strip():
            continue
        elif text.strip() == DEFAULT_WILDCARD and not statements:
            continue  # a bare `...` is ignored where it cannot mean any output
        elif text.strip() == DEFAULT_WILDCARD or (text.startswith(_CONTINUATION) and statements):
            last = statements[-1]
            statements[-1] = Statement(last.line, last.source, (*last.output, text))
        elif not statements:
            message = f"unexpected line {text!r} before any '>>> ' statement: start a statement with '>>> '"
            problems.append(Problem(file, number, message))
        else:
            last = statements[-1]
            statements[-1] = Statement(last.line, last.source, (*last.output, text))
    return statements, problems


def _expected_body(statements: Sequence[Statement]) -> str | None:
    """The whole stdout expected: each statement's output lines in turn, `...` for each that may print anything;
    None when no statement gives output (then only the exit status counts, as in the reference)."""
    if all(each.output in ((), (DEFAULT_WILDCARD,)) for each in statements):
        return None
    body = ""
    for each in statements:
        if each.output in ((), (DEFAULT_WILDCARD,)):
            body = body if body.endswith(DEFAULT_WILDCARD) else body + DEFAULT_WILDCARD
        else:
            joined = "\n".join(each.output)
            body = joined if not body else body + joined if body.endswith(DEFAULT_WILDCARD) else f"{body}\n{joined}"
    return body
