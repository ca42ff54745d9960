"""Colour in the job log: whether the console gets it (a terminal, GitHub Actions, NO_COLOR, FORCE_COLOR), and where.

Only the harness's own words are coloured (status words, the verdict) and
the `+`/`-` lines of a diff, always after the text is cleaned and masked: a
colour code can neither split a secret nor come from a block. Files (results.json,
JUnit, the step summary, block outputs) never hold colour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn, TextIO

from ci.base import frozen
from ci.guide.model import Status

__all__ = ["NO_COLOUR", "Palette", "colour_wanted", "status_colour"]

GREEN = "32"
RED = "31"
YELLOW = "33"


def colour_wanted(stream: TextIO, environ: Mapping[str, str], *, github: bool) -> bool:
    """Whether the log on STREAM gets colour.

    FORCE_COLOR set and not empty turns it on, whatever its value (force-color.org;
    it wins over NO_COLOR, as that convention's example has it); else NO_COLOR
    set and not empty turns it off (no-color.org); else the log of GitHub
    Actions (which renders ANSI colour) and a terminal get it, but for one
    that says it cannot show it (TERM=dumb); a file or a pipe does not.
    """
    if environ.get("FORCE_COLOR"):
        return True
    if environ.get("NO_COLOR"):
        return False
    if github:
        return True
    if environ.get("TERM") == "dumb":  # an editor's shell, a bare console: escapes would show as text
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # no descriptor (a StringIO), or a closed one
        return False


def _unhandled(status: NoReturn) -> NoReturn:  # typing.assert_never is Python 3.11+
    raise AssertionError(f"unhandled status {status!r}")


def status_colour(status: Status) -> str:
    """Green for passed, red for what fails the run, yellow for what did not run."""
    match status:
        case Status.PASSED:
            return GREEN
        case Status.FAILED | Status.MISMATCH | Status.TIMED_OUT | Status.ERROR:
            return RED
        case Status.SKIPPED | Status.NOT_RUN:
            return YELLOW
        case _:
            _unhandled(status)


@frozen
class Palette:
    """Paints cleaned, masked text for the console; with `enabled` False, leaves it as it is."""

    enabled: bool

    def paint(self, text: str, colour: str) -> str:
        return f"\x1b[{colour}m{text}\x1b[0m" if self.enabled and text else text

    def verdict(self, verdict: str) -> str:
        """A run's or a guide's verdict word: PASSED, FAILED or INTERRUPTED."""
        return self.paint(verdict, {"PASSED": GREEN, "FAILED": RED}.get(verdict, YELLOW))

    def diff(self, text: str) -> str:
        """A mismatch's diff hunk with its added lines green and its removed lines red.

        The hunk has no `---`/`+++` file header: a line that starts so is a
        changed line whose text starts with `--` or `++` (`-- a comment`).
        """
        if not self.enabled:
            return text
        lines = []
        for line in text.split("\n"):
            if line.startswith("+"):
                line = self.paint(line, GREEN)
            elif line.startswith("-"):
                line = self.paint(line, RED)
            lines.append(line)
        return "\n".join(lines)


NO_COLOUR = Palette(enabled=False)
