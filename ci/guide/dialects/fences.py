"""The plain-fence dialect: every `shell` fence runs, `shell skip` is skipped, a `text` fence right after is its output.

Upstream guides written for the reference project's llama.cpp and deepspeed
guards read this way. Each run fence is a bash step in the run's one working
directory, its stderr merged into its stdout; the expected text is searched for
anywhere in that merged output (Expected.search), with its placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ci.base.text import first_control
from ci.guide.dialects.fences_scan import (
    Fence,
    full_width_fence,
    heading_above,
    scan_fences,
    timeout_by_kind,
    unclosed_fence,
)
from ci.guide.model import (
    DEFAULT_WILDCARD,
    DocumentError,
    Expected,
    GuideSettings,
    Label,
    Language,
    Load,
    Plan,
    Problem,
    Step,
    TimeoutRule,
)
from ci.guide.parse import ascii_form

__all__ = [
    "RUN_LANGUAGE",
    "SKIP_MARKER",
    "UPSTREAM_COMMIT",
    "UPSTREAM_REF",
    "has_fences",
    "plan_fences",
    "upstream_ref",
    "upstream_variable",
]

RUN_LANGUAGE = "shell"  # only a fence whose language word is exactly this runs
SKIP_MARKER = "skip"  # `shell skip`: logged, not run
OUTPUT_LANGUAGE = "text"
_OTHER_SHELL_WORDS = ("bash", "sh")  # what the label contract runs as shell too, and this dialect never
# `<UPSTREAM_REF>` is the upstream commit under test: --set UPSTREAM_REF=..., else the environment's (upstream_ref)
UPSTREAM_REF = "UPSTREAM_REF"
UPSTREAM_COMMIT = "UPSTREAM_COMMIT"  # the environment variable that wins over UPSTREAM_REF, as the reference's tests
_SUPPORTED = "```shell (runs), ```shell skip (skipped), ```text right after a ```shell fence (its expected output)"


def upstream_variable(environ: Mapping[str, str]) -> str:
    """The environment variable that gives `<UPSTREAM_REF>` its value: UPSTREAM_COMMIT when it is set and not
    empty, else UPSTREAM_REF (the reference engine's project tests fill it so)."""
    return UPSTREAM_COMMIT if environ.get(UPSTREAM_COMMIT) else UPSTREAM_REF


def upstream_ref(environ: Mapping[str, str]) -> str | None:
    """The value of `<UPSTREAM_REF>` the environment gives (see upstream_variable); None when neither variable is
    set or both are empty."""
    return environ.get(upstream_variable(environ)) or None


def has_fences(lines: Sequence[str]) -> bool:
    """Whether the text holds a fence this dialect runs or skips, or one it would but for a closing line."""
    unclosed = unclosed_fence(lines)
    if unclosed is not None and unclosed[1] == RUN_LANGUAGE:
        return True
    return any(fence.language == RUN_LANGUAGE for fence in scan_fences(lines))


def plan_fences(
    lines: Sequence[str],
    file: str,
    settings: GuideSettings,
    *,
    preset_names: Iterable[str],
    default_s: float,
    rules: Sequence[TimeoutRule],
    source_path: str | None,
    upstream_ref: str | None = None,
    upstream_variable: str = UPSTREAM_REF,
) -> Plan:
    """The plan of a plain-fence guide; DocumentError for a run fence holding doctest prompts.

    UPSTREAM_REF, from the environment's UPSTREAM_VARIABLE, is put in the text for `<UPSTREAM_REF>` (as the
    reference does) unless PRESET_NAMES has it (--set gives it when the block runs).
    """
    preset = set(preset_names)
    unusable = None  # why the environment's value cannot stand for `<UPSTREAM_REF>`
    if upstream_ref and UPSTREAM_REF not in preset:
        unusable = _unusable_ref(upstream_ref, upstream_variable)
        if unusable is None:
            lines = [line.replace(f"<{UPSTREAM_REF}>", upstream_ref) for line in lines]
    fences = scan_fences(lines)
    problems: list[Problem] = []
    warnings: list[Problem] = []
    steps: list[Step] = []
    for index, fence in enumerate(fences):
        if fence.language != RUN_LANGUAGE:
            typed = full_width_fence(fence, file, _FULL_WIDTH)
            problems.extend([typed] if typed else [])
            warnings.extend(_lettercase(fence, fences[index - 1] if index else None, file))
            continue
        problems.extend(_prompts(fence, file))
        skipped = SKIP_MARKER in fence.markers
        following = fences[index + 1] if index + 1 < len(fences) else None
        expected = None if skipped else _expected(fence, following, preset)
        if not skipped and UPSTREAM_REF not in preset:
            problems.extend(_unvalued(file, fence.line, fence.body, unusable))
            if expected is not None:
                problems.extend(_unvalued(file, expected.line, expected.body, unusable))
        steps.append(
            Step(
                ordinal=len(steps) + 1,
                label=Label.TEST if expected else Label.SETUP,
                id=None,
                store=None,
                language=Language.SHELL,
                language_word=fence.language,  # `skip` is told by skip_reason
                body=fence.body,
                file=file,
                line=fence.line,
                heading=heading_above(lines, fences, fence.line),
                hidden=False,
                timeout_s=timeout_by_kind(fence.body, rules, default_s),
                loads=_loads(fence.body, preset),
                skip_reason=f"```{RUN_LANGUAGE} {SKIP_MARKER}" if skipped else None,
                expected=expected,
                merge_streams=True,
            )
        )
    if not steps:
        message = (
            f"no ```{RUN_LANGUAGE} fence at any line, and the fences dialect (--dialect fences, the registry entry's"
            f" dialect or the front matter's ci.dialect) runs every one: write the commands in ```{RUN_LANGUAGE}"
            " fences, or read the guide in the dialect it is written in (--dialect pycon for a ```pycon session,"
            " labels for labelled blocks)"
        )
        problems.append(Problem(file, 0, message))
    warnings.extend(_unclosed(lines, file))
    if problems:
        raise DocumentError(problems, tuple(warnings))
    return Plan(guide=file, source_path=source_path, steps=tuple(steps), settings=settings, warnings=tuple(warnings))


def _unclosed(lines: Sequence[str], file: str) -> tuple[Problem, ...]:
    """A warning for a ```shell or ```text fence never closed: read as prose, it would never run, or never be
    checked, and the guide would pass all the same."""
    unclosed = unclosed_fence(lines)
    if unclosed is None:
        return ()
    line, language = unclosed
    words = lines[line - 1][3:].split()
    if language == RUN_LANGUAGE and SKIP_MARKER not in words[1:]:
        what = "so its commands never run"
    elif language == OUTPUT_LANGUAGE:
        what = "so the output it expects is never checked"
    else:
        return ()
    message = (
        f"this ```{language} fence is never closed, {what} (the text after it reads as prose): close it with a"
        " line of three backticks (```)"
    )
    return (Problem(file, line, message),)


# a ```shell or ```text fence whose language word is typed in full-width characters: read as another language,
# its commands would never run (or its output never be checked) and the guide would pass
_FULL_WIDTH = {
    RUN_LANGUAGE: f"this is no ```{RUN_LANGUAGE} fence and its commands never run",
    OUTPUT_LANGUAGE: f"this is no ```{OUTPUT_LANGUAGE} fence and the output it shows is never checked",
}


def _lettercase(fence: Fence, previous: Fence | None, file: str) -> list[Problem]:
    """A warning for a fence whose language word is this dialect's own but for its letters' case (```Shell, ```SHELL;
    ```Text right after a run fence), or a shell word of the label contract in capitals (```Bash): the reference
    engine reads the word as written, so its commands never run (or its output is never checked), and neither does
    this dialect, but it says so."""
    word = fence.language
    meant = word.lower()
    if word == meant or ascii_form(word) != word:  # lower case, or full-width (_full_width says it)
        return []
    opening = " ".join([meant, *fence.markers])
    if meant == RUN_LANGUAGE:
        what, fix = "never runs", f"write it in lower case: ```{opening}"
    elif meant in _OTHER_SHELL_WORDS:
        what = "never runs"
        fix = (
            f"this dialect runs only ```{RUN_LANGUAGE} fences (as the reference engine does), and a ```{meant} one"
            f" neither: write ```{RUN_LANGUAGE} to run it"
        )
    elif meant == OUTPUT_LANGUAGE and _runs(previous) and previous is not None and previous.followed_closely:
        what = "is no expected output, so the output it shows is never checked (the run fence's exit status alone is)"
        fix = f"write it in lower case: ```{opening}"
    else:
        return []
    return [Problem(file, fence.line, f"this ```{word} fence {what}, its language word read as written: {fix}")]


def _runs(fence: Fence | None) -> bool:
    """Whether FENCE is a ```shell fence that runs (not `shell skip`)."""
    return fence is not None and fence.language == RUN_LANGUAGE and SKIP_MARKER not in fence.markers


def _prompts(fence: Fence, file: str) -> list[Problem]:
    """A problem for the first line of a run fence that starts with a doctest prompt: it is not pasteable bash."""
    for offset, text in enumerate(fence.body.split("\n"), 1):
        stripped = text.lstrip()
        if stripped.startswith(">>>") or stripped.startswith("... "):
            message = (
                "a ```shell fence holds a doctest prompt (a line starting '>>>' or '... '); write pasteable bash, "
                f"or put Python console text in a ```pycon fence. Fences this dialect reads: {_SUPPORTED}"
            )
            return [Problem(file, fence.line + offset, message)]
    return []


def _unusable_ref(value: str, variable: str) -> str | None:
    """The problem with VALUE, the environment's VARIABLE, as the text of `<UPSTREAM_REF>`: a control character
    (a newline, as a file's whole text or a command's output brings), which no git ref holds (git-check-ref-format:
    no ASCII control characters); None when there is none."""
    control = first_control(value)
    if control is None:
        return None
    what = "a newline" if control == "\n" else f"the control character {control!r}"
    shown = repr(value[:60]) + (" (cut)" if len(value) > 60 else "")
    return (
        f"the environment's {variable}, {shown}, holds {what}, and a git ref never does, so <{UPSTREAM_REF}> cannot"
        f" take its value and the fence cannot run as written: set {variable} to the one commit or tag under test"
        f" and nothing else (e.g. $(git rev-parse HEAD), not a file's whole text), or give it with"
        f" --set {UPSTREAM_REF}=COMMIT"
    )


def _unvalued(file: str, fence_line: int, body: str, unusable: str | None) -> list[Problem]:
    """A problem for the first line of BODY (the fence at FENCE_LINE) holding `<UPSTREAM_REF>` when it has no value
    (or, UNUSABLE, one that cannot be a ref): bash would read it as a redirection from a file named UPSTREAM_REF,
    and an expected text would look for it."""
    placeholder = f"<{UPSTREAM_REF}>"
    for offset, text in enumerate(body.split("\n"), 1):
        if placeholder in text:
            message = unusable or (
                f"{placeholder} has no value, so the fence cannot run as written (bash would read it as a"
                f" redirection): give the upstream commit under test with --set {UPSTREAM_REF}=COMMIT, or in the"
                f" environment's {UPSTREAM_COMMIT} or {UPSTREAM_REF} (the guide workflows set it from the registry"
                " entry's upstream ref)"
            )
            return [Problem(file, fence_line + offset, message)]
    return []


def _expected(fence: Fence, following: Fence | None, preset: set[str]) -> Expected | None:
    """The `text` fence right after a run fence (only blanks between) as its expected output, trailing blank lines
    dropped; None when there is none or it holds only blanks."""
    if following is None or following.language != OUTPUT_LANGUAGE or not fence.followed_closely:
        return None
    expected_lines = following.body.split("\n")
    while expected_lines and not expected_lines[-1].strip():
        expected_lines.pop()
    if not expected_lines:
        return None
    body = "\n".join(expected_lines)
    return Expected(
        body=body,
        fuzzy=(DEFAULT_WILDCARD,),
        loads=_loads(body, preset),
        line=following.line,
        search=True,
    )


def _loads(text: str, preset: set[str]) -> tuple[Load, ...]:
    """`<UPSTREAM_REF>` replaced by the value of UPSTREAM_REF (--set, else the environment's), when there is one."""
    return (Load(UPSTREAM_REF, UPSTREAM_REF),) if UPSTREAM_REF in preset and f"<{UPSTREAM_REF}>" in text else ()
