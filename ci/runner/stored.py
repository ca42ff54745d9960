"""Long texts of a step bounded for its reports: a setup's stored value, an expected body, each kept whole on disk;
and the warning a stored value that does not look like one value gets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ci.base.files import write_atomically
from ci.base.streams import read_head
from ci.base.text import clean_text, human_size, plural, text_head, utf8_size
from ci.guide.model import Step
from ci.record.outcome import BoundedText

__all__ = ["STORE_LIMIT_BYTES", "bounded", "kept_value", "read_stored", "stored_text", "stored_value_warning"]

STORE_LIMIT_BYTES = 16 * 1024 * 1024  # of a setup's stdout, at most this much is stored


def bounded(
    text: str,
    whole_file: Path | None,
    *,
    written: bool = False,
    within: Path | None = None,
    cut: bool = False,
) -> BoundedText:
    """TEXT as reports show it: whole when short, else its head and a file that holds it whole.

    WHOLE_FILE is that file: written here with TEXT unless WRITTEN says it
    holds it already, as a new file under WITHIN (the output directory;
    default: the file's own directory); None where there is none to write (a block that never
    started keeps no file). A file that cannot be written is named nowhere.
    CUT keeps a short text in that file too, reported as not shown whole: what
    reports show of it (cleaned, secrets masked) is not the text itself.
    """
    head = text_head(text)
    if head is None and not cut:
        return BoundedText(text, utf8_size(text), complete=True)
    head = text if head is None else head
    path = None
    if whole_file is not None:
        try:
            if not written:
                write_atomically(whole_file, text, encoding="utf-8", within=within or whole_file.parent)
            path = str(whole_file)
        except (OSError, UnicodeError):  # its directory was removed by a block; a lone surrogate from --set
            path = None
    return BoundedText(head, utf8_size(text), complete=False, path=path)


def read_stored(stdout_path: Path, stem: str, *, within: Path) -> tuple[str, BoundedText, str]:
    """A setup's stored value, how reports show it, and a note for its message ("" unless it was cut).

    The value is its stdout as UTF-8 (invalid bytes replaced), at most
    STORE_LIMIT_BYTES of it (never cut inside a secret: read_head), trailing whitespace removed. A long value is kept
    whole on disk: in the stdout file itself when that is the value with its
    trailing whitespace, else in STEM.stored.txt beside it (under WITHIN, the output directory).
    """
    value, size, exact = read_head(stdout_path, STORE_LIMIT_BYTES)
    cut = size > STORE_LIMIT_BYTES
    value = value.rstrip()
    whole = stdout_path if exact else Path(f"{stem}.stored.txt")
    shown = bounded(value, whole, written=exact, within=within)
    note = f" (first {human_size(STORE_LIMIT_BYTES)} of {human_size(size)})" if cut else ""
    return value, shown, note


def stored_text(path: Path) -> str:
    """The value a setup stored, read back from the file holding it (its stdout, or the whole value kept beside it)
    as read_stored read it: at most STORE_LIMIT_BYTES, as UTF-8 (invalid bytes replaced), trailing whitespace
    removed. OSError when it cannot be read."""
    with open(path, "rb") as handle:
        raw = handle.read(STORE_LIMIT_BYTES)
    return raw.decode("utf-8", "replace").rstrip()


def kept_value(value: str, stem: str, output_dir: Path) -> BoundedText:
    """How a resumed run reports a value a kept setup stored in the run it resumes: as a stored value, kept whole
    in STEM.stored.txt when long, and also when the record would not hold it as it is (a secret masked, a control
    character dropped), so that a run resuming this one takes the value itself."""
    exact = clean_text(value) == value
    return bounded(value, Path(f"{stem}.stored.txt"), within=output_dir, cut=not exact)


# What a terminal, not a reader, is meant to see: escape sequences (7-bit ESC, 8-bit CSI) and the other C0 controls
# (a backspace redrawing a spinner); tabs and line ends are text. Carriage returns are counted apart: a progress bar
# redraws its line with them, and `$(...)` keeps every redraw.
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x9b]")


def _loaded_by(step: Step, steps: Sequence[Step], name: str) -> list[str]:
    """Where the value STEP stores as NAME is loaded: each later block (or #test-result) loading NAME, up to the next
    setup storing NAME anew, as `#test id=serve (line 40)`."""
    places = []
    for later in steps:
        if later.ordinal <= step.ordinal:
            continue
        named = f"{later.label.value} {(later.named_by or (f'#{later.ordinal}',))[0]}"
        if any(load.name == name for load in later.loads):
            places.append(f"{named} (line {later.line})")
        if later.expected is not None and any(load.name == name for load in later.expected.loads):
            places.append(f"#test-result {(later.named_by or (f'#{later.ordinal}',))[0]} (line {later.expected.line})")
        if later.store == name:
            break
    return places


def stored_value_warning(step: Step, value: str, steps: Sequence[Step]) -> str | None:
    """What to warn of when STEP stored VALUE (whole) and it spans several lines, or holds carriage returns or other
    terminal control (a download client's progress bar captured with the path): its name, its lines and bytes, what
    it holds, and the blocks of STEPS (the plan) that load it. None for a value of one clean line.

    The warning quotes nothing of the value, which may be a secret.
    """
    assert step.store is not None
    lines = value.count("\n") + 1
    returns = value.count("\r")
    controls = len(_TERMINAL_CONTROL.findall(value))
    if lines == 1 and not returns and not controls:
        return None
    held = [plural(returns, "carriage return")] if returns else []
    held += [plural(controls, "terminal control character")] if controls else []
    holds = f", holding {' and '.join(held)} (progress output?)" if held else ""
    places = _loaded_by(step, steps, step.store)
    loaded = f"loaded by {', '.join(places)}" if places else "loaded by no block"
    size = f"{plural(lines, 'line')} and {plural(utf8_size(value), 'byte')}"
    return (
        f"the value stored as {step.store} has {size}{holds}; {loaded}."
        " A value is usually one line: print it alone to stdout and the rest to stderr (>&2)"
    )
