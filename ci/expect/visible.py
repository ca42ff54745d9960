"""Characters a reader cannot see, or cannot tell from others, written out in a mismatch's diff and message.

Two lines that differ only in such characters look the same in a log: a soft
hyphen, a left-to-right mark, a variation selector or a zero-width space
shows as nothing, a no-break space as a space, `e` followed by a combining
acute accent as the one character `é`. The diff writes each of them as
`<U+XXXX>`, a tab as `\\t` and a space ending a line as `\\x20`, so that the
lines it sets against each other look as different as they are.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["invisible_characters", "looks_alike", "show_invisible"]

# Blanks other than the space (category Zs, and the line and paragraph separators), the code points
# Unicode calls default-ignorable (a renderer shows nothing for them: variation selectors, fillers, tags),
# and the Braille blank, which shows as a space. Format characters (category Cf) are added by category.
_ODD_BLANKS = "\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\u2800"
_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_INVISIBLE = re.compile(f"[{_ODD_BLANKS}{_IGNORABLE}]")
_MARKS = ("Mn", "Mc", "Me")  # the combining marks: drawn on the character before them


def _is_invisible(char: str) -> bool:
    return _INVISIBLE.match(char) is not None or unicodedata.category(char) == "Cf"


def _named(char: str) -> str:
    return f"<U+{ord(char):04X}>"


def _show_composed(line: str) -> str:
    """LINE with each character that has another form drawn the same written out: the combining marks of a
    character that Unicode also has whole (`e` + U+0301 drawn as `é`), and a character with a canonical twin
    (the Angstrom sign U+212B and `Å`)."""
    if unicodedata.is_normalized("NFC", line):
        return line
    parts = []
    start = 0
    while start < len(line):
        end = start + 1
        while end < len(line) and unicodedata.category(line[end]) in _MARKS:
            end += 1
        run = line[start:end]
        if unicodedata.normalize("NFC", run) != run:
            run = "".join(_named(char) if index or len(run) == 1 else char for index, char in enumerate(run))
        parts.append(run)
        start = end
    return "".join(parts)


def show_invisible(line: str) -> str:
    """LINE with what a reader cannot see or tell apart written out: a tab `\\t`, each space ending the line
    `\\x20`, an invisible or look-alike character `<U+00AD>` (the rest as it is)."""
    line = "".join(_named(char) if _is_invisible(char) else char for char in _show_composed(line))
    line = line.replace("\t", "\\t")
    kept = line.rstrip(" ")
    return kept + "\\x20" * (len(line) - len(kept))


def invisible_characters(text: str) -> list[str]:
    """The characters of TEXT that `show_invisible` writes out as `<U+XXXX>`, each once, in order, named:
    `<U+00AD> (soft hyphen)`."""
    shown = show_invisible(text)
    return [
        f"{_named(char)} ({unicodedata.name(char, 'unnamed character').lower()})"
        for char in dict.fromkeys(text)
        if char not in "\t " and _named(char) in shown
    ]


def looks_alike(first: str, second: str) -> bool:
    """Whether FIRST and SECOND differ, but look the same: only in characters `show_invisible` writes out."""
    return first != second and _seen(first) == _seen(second)


def _seen(line: str) -> str:
    """LINE as a reader sees it: composed, blanks of every kind one space, what shows as nothing dropped."""
    seen = "".join(
        " " if char.isspace() or char == "\u2800" else "" if _is_invisible(char) else char
        for char in unicodedata.normalize("NFC", line)
    )
    return " ".join(seen.split())
