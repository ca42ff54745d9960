"""The Python-console dialect: the first `pycon` fence's `>>> ` statements run as one Python program.

A superset of the reference project's transformers guard: `>>> ` opens a
statement, `... ` continues it, bare `>>>` and `...` lines are ignored; any
other line after a statement is that statement's expected output (as a doctest
reads it), and a statement without output lines, or with a bare `...`, may print
anything. The statements run as the interactive console runs them (an
expression's value is printed), in one process, as one ordinary python step;
its stdout is matched whole against the outputs given, each statement without
one standing for any text, and each expected line points at its own guide line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ci.base import frozen
from ci.guide.dialects.fences_scan import Fence, full_width_fence, heading_above, scan_fences, timeout_by_kind
from ci.guide.model import (
    DEFAULT_WILDCARD,
    DocumentError,
    Expected,
    GuideSettings,
    Label,
    Language,
    Plan,
    Problem,
    Step,
    TimeoutRule,
)

__all__ = [
    "CONSOLE_LANGUAGE",
    "ConsoleStatement",
    "console_expected",
    "console_statements",
    "has_console",
    "plan_console",
    "readable_statements",
]

CONSOLE_LANGUAGE = "pycon"
_PROMPT = ">>> "
_CONTINUATION = "... "
# Runs each statement as the console does ("single": an expression's value is printed), falling back to a
# whole program for text the console would refuse as one statement; an exception ends the program with it.
# Each statement's lines and columns are the guide's, so that a traceback names the guide's file, line and text.
# Stdout is line-buffered, as a console's is (a terminal): what a subprocess or os.system prints comes after the
# lines printed before it, not before the block of them Python would otherwise hold back for a pipe or a file.
_PROGRAM = """\
import ast as _ast, sys as _sys
_sys.stdout.reconfigure(line_buffering=True)
_statements = {statements!r}
_names = {{"__name__": "__main__"}}
for _line, _source in _statements:
    try:
        _tree = _ast.parse(_source + "\\n", {file!r}, "single")
    except SyntaxError:
        try:
            _tree = _ast.parse(_source + "\\n", {file!r}, "exec")
        except SyntaxError as _error:  # said as the console says it, at the guide's line and column
            _at = min(max(_error.lineno or 1, 1), _source.count("\\n") + 1)
            _error.text = (">>> " if _at == 1 else "... ") + _source.split("\\n")[_at - 1] + "\\n"
            _error.lineno, _error.end_lineno = _at + _line - 1, None
            _error.offset = _error.offset and _error.offset + 4
            _error.end_offset = None
            import traceback as _traceback
            _sys.stderr.write("".join(_traceback.format_exception_only(SyntaxError, _error)))
            raise SystemExit(1)
    for _node in _ast.walk(_tree):  # past the 4 characters of each line's prompt
        if getattr(_node, "end_col_offset", None) is not None:
            _node.col_offset += 4
            _node.end_col_offset += 4
    _mode = "single" if isinstance(_tree, _ast.Interactive) else "exec"
    exec(compile(_ast.increment_lineno(_tree, _line - 1), {file!r}, _mode), _names)
    _sys.stdout.flush()  # as the console does after each statement: a line begun with end="" too
"""


@frozen
class ConsoleStatement:
    """One `>>> ` statement with its continuation lines and the output lines the guide gives after it."""

    line: int  # 1-based line of its `>>> `
    source: str  # the statement without its prompts
    output: tuple[str, ...]  # the output lines as written; () or ("...",) for any output
    output_lines: tuple[int, ...]  # the guide line of each output line, in order
    last_line: int  # 1-based line of its last `... ` continuation, else of its `>>> `

    @property
    def any_output(self) -> bool:
        """Whether it may print anything: no output line, or a bare `...` alone."""
        return self.output in ((), (DEFAULT_WILDCARD,))


def has_console(lines: Sequence[str]) -> bool:
    """Whether the text holds a `pycon` fence."""
    return any(fence.language == CONSOLE_LANGUAGE for fence in scan_fences(lines))


def readable_statements(lines: Sequence[str], file: str) -> list[ConsoleStatement]:
    """The statements of the first `pycon` fence as the plan runs them, the lines it cannot read left out ([] without
    a fence): what the drift check compiles and compares, whatever the contract check says of the rest."""
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
    fence, statements = console_statements(lines, file)
    program = _PROGRAM.format(statements=[(each.line, each.source) for each in statements], file=file)
    expected = console_expected(statements, fence.line)
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
        heading=heading_above(lines, scan_fences(lines), fence.line),
        hidden=False,
        timeout_s=timeout_by_kind("\n".join(each.source for each in statements), rules, default_s),
        loads=(),
        skip_reason=None,
        expected=expected,
    )
    return Plan(guide=file, source_path=source_path, steps=(step,), settings=settings)


def console_statements(lines: Sequence[str], file: str) -> tuple[Fence, list[ConsoleStatement]]:
    """The first `pycon` fence and its statements; DocumentError when there is none, or for a line that is neither
    prompt nor output."""
    fences = scan_fences(lines)
    fence = next((each for each in fences if each.language == CONSOLE_LANGUAGE), None)
    # a ```pycon fence typed in full-width characters before the first one typed in ASCII (or with none): left
    # out, another session would run in its place, or none be found
    consequence = {CONSOLE_LANGUAGE: f"this is no ```{CONSOLE_LANGUAGE} fence and no console session runs from it"}
    before = fences if fence is None else fences[: fences.index(fence)]
    typed = [problem for each in before if (problem := full_width_fence(each, file, consequence))]
    if typed:
        raise DocumentError(typed)
    if fence is None:
        message = (
            f"no ```{CONSOLE_LANGUAGE} fence at any line, and the pycon dialect (--dialect pycon, the registry entry's"
            f" dialect or the front matter's ci.dialect) runs the first one: put the console session in a"
            f" ```{CONSOLE_LANGUAGE} fence, or read the guide in the dialect it is written in (--dialect fences for"
            " ```shell fences, labels for labelled blocks)"
        )
        raise DocumentError([Problem(file, 0, message)])
    statements, problems = _statements(fence.body.split("\n"), fence.line + 1, file)
    if not statements and not problems:
        message = (
            f"the ```{CONSOLE_LANGUAGE} fence holds no '{_PROMPT}' statement, so there is nothing to run: start each"
            f" statement with '{_PROMPT}' (its continuation lines with '{_CONTINUATION}')"
        )
        problems.append(Problem(file, fence.line, message))
    if problems:
        raise DocumentError(problems)
    return fence, statements


def _statements(body_lines: Sequence[str], first_line: int, file: str) -> tuple[list[ConsoleStatement], list[Problem]]:
    statements: list[ConsoleStatement] = []
    problems: list[Problem] = []

    def add_output(text: str, number: int) -> None:
        last = statements[-1]
        output, output_lines = (*last.output, text), (*last.output_lines, number)
        statements[-1] = dataclasses.replace(last, output=output, output_lines=output_lines)

    for number, text in enumerate(body_lines, first_line):
        if text.startswith(_PROMPT):
            statements.append(ConsoleStatement(number, text[len(_PROMPT) :], (), (), number))
        elif text.startswith(_CONTINUATION) and statements and not statements[-1].output:
            last = statements[-1]
            source = f"{last.source}\n{text[len(_CONTINUATION) :]}"
            statements[-1] = dataclasses.replace(last, source=source, last_line=number)
        elif text.strip() == _PROMPT.strip() or not text.strip():
            continue
        elif text.strip() == DEFAULT_WILDCARD and not statements:
            continue  # a bare `...` is ignored where it cannot mean any output
        elif statements:  # a bare `...`, a `... ` line after output, any other text: the statement's output
            add_output(text, number)
        else:
            message = f"unexpected line {text!r} before any '>>> ' statement: start a statement with '>>> '"
            problems.append(Problem(file, number, message))
    return statements, problems


def console_expected(statements: Sequence[ConsoleStatement], fence_line: int) -> Expected | None:
    """The whole stdout expected, each line pointing at its guide line; None when no statement gives output (then
    only the exit status counts, as in the reference).

    Each statement's output lines in turn; a run of statements that may print
    anything is a `...` that opens the next output's first line (`...B`: the
    run may have printed nothing, or lines, before B), or ends the body. A
    `...` alone on a line between outputs would want a line break on both
    sides of it, failing a statement that printed nothing.
    """
    if all(each.any_output for each in statements):
        return None
    lines: list[str] = []
    guide_lines: list[int] = []
    pending: int | None = None  # the guide line of a run of any output not yet put in the body
    for each in statements:
        if each.any_output:
            pending = pending or (each.output_lines[0] if each.output_lines else each.line)
            continue
        for text, number in zip(each.output, each.output_lines, strict=True):
            lines.append(text if pending is None else DEFAULT_WILDCARD + text)
            guide_lines.append(number)
            pending = None
    if pending is not None:
        lines.append(DEFAULT_WILDCARD)
        guide_lines.append(pending)
    body = "\n".join(lines)
    return Expected(body, (DEFAULT_WILDCARD,), loads=(), line=fence_line, guide_lines=tuple(guide_lines))
