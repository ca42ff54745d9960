"""Long texts of a step bounded for its reports: a setup's stored value, an expected body, each kept whole on disk."""

from __future__ import annotations

from pathlib import Path

from ci.base.files import write_atomically
from ci.base.streams import read_head
from ci.base.text import clean_text, human_size, text_head, utf8_size
from ci.record.outcome import BoundedText

__all__ = ["STORE_LIMIT_BYTES", "bounded", "kept_value", "read_stored", "stored_text"]

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
