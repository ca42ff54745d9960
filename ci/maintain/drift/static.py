"""Check 2, static: `bash -n`, shellcheck and compile() of every runnable block, and the lessons of real nights
(lessons.py) on its shell, executing none of them."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence

from ci.guide.dialects import guide_lines
from ci.guide.dialects.pycon import CONSOLE_LANGUAGE, ConsoleStatement, readable_statements
from ci.guide.model import Block, Label, Language, Load, Plan
from ci.guide.parse import ParsedGuide
from ci.guide.plan import LANGUAGES, block_loads
from ci.guide.settings import guide_settings
from ci.maintain.drift.findings import STATIC, Finding, Severity, block_name, first_param
from ci.maintain.drift.lessons import ShellBlock, lesson_findings

__all__ = ["plain_static_findings", "python_c_programs", "python_heredocs", "static_findings"]

BASH_TIMEOUT_S = 60.0  # `bash -n` only parses
SHELLCHECK_TIMEOUT_S = 120.0  # shellcheck can take long on a large block


def _loaded_placeholders(block: Block) -> list[str]:
    return [load.placeholder for load in block_loads(block)]


def _placeholders(loads: Sequence[Load]) -> list[str]:
    return [load.placeholder for load in loads]


def _dummy(placeholder: str) -> str:
    return "dummy_" + re.sub(r"\W", "_", placeholder)


def _python_source(body: str, placeholders: Sequence[str]) -> str:
    """The body with each loaded `<PH>` replaced by a plain name, as a value would stand there."""
    for placeholder in placeholders:
        body = body.replace(f"<{placeholder}>", _dummy(placeholder))
    return body


def _shell_script(body: str, placeholders: Sequence[str]) -> str:
    """The body with each loaded `<PH>` replaced by a variable (`<ref>` would read as a redirection).

    A variable, not a word, so shellcheck does not call `[[ "<ref>" =~ ... ]]`
    a constant expression; they are exported on the first line (no line
    moves, and shellcheck does not call them unused).
    """
    for placeholder in placeholders:
        body = body.replace(f"<{placeholder}>", "${" + _dummy(placeholder) + "}")
    if placeholders:
        body = f"export {' '.join(_dummy(p) + '=x' for p in dict.fromkeys(placeholders))}; {body}"
    return body + "\n"


_HEREDOC = re.compile(r"\bpython(?:3(?:\.\d+)?)?\b[^\n#]*?(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_SHELL_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@*#?!$-]")
# in an unquoted heredoc: an escaped character stands for itself, an expansion for a harmless value
_UNQUOTED_HEREDOC = re.compile(r"\\([\\$`])|" + _SHELL_EXPANSION.pattern)


def _as_the_shell_leaves_it(match: re.Match[str]) -> str:
    """For the escape-or-expansion patterns: an escaped character stands for itself, an expansion for 0."""
    return match.group(1) or "0"


def python_heredocs(body: str) -> list[tuple[int, str]]:
    """Python programs fed on a heredoc (`python - ARGS <<'PY'`, `python3 <<EOF`, `<<-EOF`).

    Returns (0-based body line of the program's first line, program). An
    unquoted delimiter lets the shell expand `$...` first, so those are
    replaced by a harmless 0; `<<-` strips leading tabs as bash does.
    """
    lines = body.split("\n")
    found = []
    for index, line in enumerate(lines):
        heredoc = _HEREDOC.search(line)
        if heredoc is None:
            continue
        strip_tabs, quoted, delimiter = heredoc.group(1) == "-", bool(heredoc.group(2)), heredoc.group(3)
        program = []
        for later in lines[index + 1 :]:
            text = later.lstrip("\t") if strip_tabs else later
            if text == delimiter:
                break
            program.append(text if quoted else _UNQUOTED_HEREDOC.sub(_as_the_shell_leaves_it, text))
        found.append((index + 1, "\n".join(program)))
    return found


_PYTHON_C = re.compile(
    r"""\bpython(?:3(?:\.\d+)?)?(?:[ \t]+-[A-Za-bd-z]+)*[ \t]+-c[ \t]+(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""", re.S
)

# inside double quotes: an escaped character stands for itself, an expansion for a harmless value
_DOUBLE_QUOTED = re.compile(r'\\([\\"$`])|' + _SHELL_EXPANSION.pattern)


def python_c_programs(body: str) -> list[tuple[int, str]]:
    """Python programs given as `python -c "..."` or `python3 -c '...'`, one line or several.

    Returns (0-based body line of the program's first line, program). In a
    double-quoted string the shell expands `$...` first (replaced by a
    harmless 0) and drops the backslash before a double quote, a dollar
    sign, a backslash or a backquote; a single-quoted one is taken as it is. A program that is only an
    expansion (`python -c "$CODE"`) has nothing to check.
    """
    found = []
    for match in _PYTHON_C.finditer(body):
        double, single = match.group(1), match.group(2)
        if double is not None:
            code = _DOUBLE_QUOTED.sub(_as_the_shell_leaves_it, double)
            start = match.start(1)
        else:
            code, start = single, match.start(2)
        if code.strip() and code.strip() != "0":
            found.append((body.count("\n", 0, start), code))
    return found


def _compile_findings(code: str, file: str, first_line: int, what: str) -> list[Finding]:
    """compile() the code; first_line is the guide line of the code's line 1."""
    try:
        compile(code, f"{file}:{first_line}", "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = first_line + max((exc.lineno or 1) - 1, 0)
        return [Finding(STATIC, Severity.ERROR, file, line, f"{what}: Python syntax error: {exc.msg}")]
    except ValueError as exc:  # e.g. a NUL byte in the source
        return [Finding(STATIC, Severity.ERROR, file, first_line, f"{what}: {exc}")]
    return []


def _run_checker(argv: list[str], script: str, timeout_s: float) -> subprocess.CompletedProcess[str] | str:
    """Run a checker on the script; why it could not check it (it hung, or would not start) instead of raising."""
    try:
        return subprocess.run(argv, input=script, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"it did not finish in {timeout_s:g}s"
    except OSError as exc:
        return f"it could not be started: {exc}"


def _not_checked(file: str, fence_line: int, what: str, checker: str, why: str) -> Finding:
    """A notice, not an error: the checker failed, which says nothing about the guide."""
    return Finding(STATIC, Severity.NOTICE, file, fence_line, f"{what}: {checker} could not check it: {why}")


def _bash_findings(script: str, file: str, fence_line: int, what: str) -> list[Finding]:
    done = _run_checker(["bash", "-n"], script, BASH_TIMEOUT_S)
    if isinstance(done, str):
        return [_not_checked(file, fence_line, what, "bash -n", done)]
    if done.returncode == 0:
        return []
    findings = []
    for message in done.stderr.splitlines():
        located = re.search(r"line (\d+): (.*)", message)
        if located:
            line = fence_line + int(located.group(1))
            findings.append(Finding(STATIC, Severity.ERROR, file, line, f"{what}: bash -n: {located.group(2)}"))
    return findings or [Finding(STATIC, Severity.ERROR, file, fence_line, f"{what}: bash -n: {done.stderr.strip()}")]


def _shellcheck_findings(
    shellcheck: str, script: str, file: str, fence_line: int, what: str, timeout_s: float
) -> list[Finding]:
    done = _run_checker([shellcheck, "--shell=bash", "--format=json1", "--severity=warning", "-"], script, timeout_s)
    if isinstance(done, str):
        return [_not_checked(file, fence_line, what, "shellcheck", done)]
    try:
        comments = json.loads(done.stdout)["comments"]
    except (ValueError, KeyError, TypeError):
        return [_not_checked(file, fence_line, what, "shellcheck", (done.stderr or done.stdout).strip()[:300])]
    findings = []
    for comment in comments:
        severity = Severity.ERROR if comment.get("level") == "error" else Severity.WARNING
        line = fence_line + int(comment.get("line") or 1)
        message = f"{what}: shellcheck SC{comment.get('code')}: {comment.get('message')}"
        findings.append(Finding(STATIC, severity, file, line, message))
    return findings


def static_findings(
    parsed: ParsedGuide, *, shellcheck: str | None, shellcheck_timeout_s: float = SHELLCHECK_TIMEOUT_S
) -> list[Finding]:
    """Syntax checks of every runnable block, executing none of them.

    Shell blocks: `bash -n` and shellcheck (errors fail, warnings annotate;
    a checker that hangs or will not start is a notice), and the lessons'
    warnings (lessons.py); Python blocks, and
    Python heredocs and `python -c` programs inside shell blocks: compile().
    Lines are the guide's: the fence line plus the line inside the block.
    """
    findings: list[Finding] = []
    shell_blocks = []
    for block in parsed.blocks:
        if block.label is Label.RESULT or block.language is None:
            continue
        language = LANGUAGES.get(block.language.lower())
        placeholders = _loaded_placeholders(block)
        what = block_name(block)
        if language is Language.PYTHON:
            findings += _compile_findings(_python_source(block.body, placeholders), parsed.file, block.line + 1, what)
        elif language is Language.SHELL:
            findings += _shell_findings(
                block.body, placeholders, parsed.file, block.line, what, shellcheck, shellcheck_timeout_s
            )
            shell_blocks.append(
                ShellBlock(
                    _shell_script(block.body, placeholders),
                    parsed.file,
                    block.line,
                    what,
                    output_checked=block.label is Label.TEST,
                    stores=first_param(block, "store") is not None,
                )
            )
    return findings + lesson_findings(shell_blocks, guide_settings(parsed)[0].env)


def plain_static_findings(
    plan: Plan, text: str, *, shellcheck: str | None, shellcheck_timeout_s: float = SHELLCHECK_TIMEOUT_S
) -> list[Finding]:
    """Syntax checks of what a plain dialect runs (PLAN, read from TEXT), executing none of it.

    The plain-fence dialect: every ```shell fence that runs (not ```shell skip) as a shell block above, its
    `<UPSTREAM_REF>` standing for a value, its output checked when an expected output follows it. The Python-console dialect: each `>>> ` statement compiled as the
    console compiles it (a single statement, else a whole program), on its own line.
    """
    findings: list[Finding] = []
    shell_blocks = []
    for step in plan.steps:
        if step.skip_reason is not None:
            continue
        what = f"{step.language_word} fence at line {step.line}"
        if step.language is Language.SHELL:
            placeholders = _placeholders(step.loads)
            findings += _shell_findings(
                step.body, placeholders, plan.guide, step.line, what, shellcheck, shellcheck_timeout_s
            )
            script = _shell_script(step.body, placeholders)
            checked = step.expected is not None
            shell_blocks.append(ShellBlock(script, plan.guide, step.line, what, checked, stores=False))
        elif step.language_word == CONSOLE_LANGUAGE:
            for statement in readable_statements(guide_lines(text), plan.guide):
                findings += _statement_findings(statement, plan.guide)
    return findings + lesson_findings(shell_blocks, plan.settings.env)


def _shell_findings(
    body: str,
    placeholders: Sequence[str],
    file: str,
    fence_line: int,
    what: str,
    shellcheck: str | None,
    shellcheck_timeout_s: float,
) -> list[Finding]:
    """bash -n and shellcheck of a shell body, and compile() of the Python programs it feeds to an interpreter."""
    script = _shell_script(body, placeholders)
    findings = _bash_findings(script, file, fence_line, what)
    if shellcheck:
        findings += _shellcheck_findings(shellcheck, script, file, fence_line, what, shellcheck_timeout_s)
    source = _python_source(body, placeholders)
    for start, program in python_heredocs(source):
        findings += _compile_findings(program, file, fence_line + 1 + start, f"{what} (Python heredoc)")
    for start, program in python_c_programs(source):
        findings += _compile_findings(program, file, fence_line + 1 + start, f"{what} (python -c)")
    return findings


def _statement_findings(statement: ConsoleStatement, file: str) -> list[Finding]:
    """A console statement compiled as the Python-console dialect's program compiles it: as one interactive
    statement, else as a program; an error of the second on the statement's line."""
    source = statement.source + "\n"
    try:
        compile(source, file, "single", dont_inherit=True)
    except SyntaxError:
        return _compile_findings(source, file, statement.line, f"pycon statement at line {statement.line}")
    except ValueError as exc:  # a NUL byte
        return [
            Finding(STATIC, Severity.ERROR, file, statement.line, f"pycon statement at line {statement.line}: {exc}")
        ]
    return []
