"""Expected output searched for anywhere in a step's output (the plain-fence dialect), in linear time.

The yardstick is the reference project's check: the expected text, its
placeholders made patterns (`1.2.x`, digits, dot, digits, dot, `x`: a
version `\\d+\\.\\d+\\.\\d+`; a word `xxx`: a run of characters that are
neither white space nor a comma; `...`: any text, line breaks too), searched
for anywhere in the output, whose line breaks of every kind are first made
`\\n`, the last one dropped. A regular expression would do, but can take
time quadratic in the output (a run of `xxx` characters that never ends in
the text after it); here no backtracking is done:

- the pattern is cut at its `...` into segments; a segment is found where
  its match ends earliest, the next searched for from there: the earliest end
  leaves the most room to what follows, so the first order found is one if
  any is;
- a segment is a chain of single characters and runs of a class, read by a
  set of positions kept as bits (a Thompson automaton), one step per
  character of the output, skipping by `str.find` to the segment's literal
  start while no match is under way.

The output is read in windows, with bounded memory, as the whole-output matcher does.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import field
from enum import Enum
from typing import NoReturn

from ci.base import frozen

__all__ = ["SearchPattern", "as_expected", "expected_runs", "search_file", "search_matches", "search_pattern"]

WINDOW_CHARS = 1 << 20  # of decoded output, fed to the automaton at a time

_VERSION = re.compile(r"\b\d+\.\d+\.x\b")  # as the guides write a version that varies: 8.0.x
_WORD = re.compile(r"\bxxx\b")  # a word that varies: a path, a number, a name
_ANY = "..."
# what str.splitlines() ends a line at: each becomes "\n" (a "\r\n" one "\n")
_LINE_BREAKS = str.maketrans(dict.fromkeys("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", "\n"))


class _Class(Enum):
    """What a position of a segment accepts besides its one character."""

    CHAR = "char"  # that character alone
    DIGIT = "digit"  # a decimal digit (Unicode category Nd), as the reference's \d
    WORD = "word"  # anything but white space and a comma, as the reference's [^,\s]


@frozen
class _Item:
    """One position of a segment: a character of CLASS, once, or (REPEAT) any number of times."""

    kind: _Class
    char: str  # for CHAR
    repeat: bool  # a star: zero or more, after the one a run starts with

    def accepts(self, char: str) -> bool:
        match self.kind:
            case _Class.CHAR:
                return char == self.char
            case _Class.DIGIT:
                return char.isdecimal()
            case _Class.WORD:
                return not char.isspace() and char != ","
            case _:
                _unhandled(self.kind)


def _unhandled(kind: NoReturn) -> NoReturn:  # typing.assert_never is Python 3.11+
    raise AssertionError(f"unhandled class {kind!r}")


def _run(kind: _Class) -> list[_Item]:
    """One or more characters of KIND: one, then any number."""
    return [_Item(kind, "", False), _Item(kind, "", True)]


@frozen
class _Segment:
    """A stretch of the pattern between two `...`: its positions, and the literal text it starts with."""

    items: tuple[_Item, ...]
    prefix: str  # its leading characters when they are plain ones ("" when it starts with a run)
    literal: bool  # nothing but plain characters: str.find alone finds it
    one_masks: dict[str, int] = field(default_factory=dict, compare=False)  # char -> bits of the `once` it passes
    star_masks: dict[str, int] = field(default_factory=dict, compare=False)  # char -> bits of the stars it stays in

    @property
    def stars(self) -> int:
        return sum(1 << i for i, item in enumerate(self.items) if item.repeat)

    def masks(self, char: str) -> tuple[int, int]:
        """The positions CHAR moves on from (a `once`), and those it stays in (a star); cached per character."""
        one = self.one_masks.get(char)
        if one is None:
            one = sum(1 << i for i, item in enumerate(self.items) if not item.repeat and item.accepts(char))
            star = sum(1 << i for i, item in enumerate(self.items) if item.repeat and item.accepts(char))
            self.one_masks[char], self.star_masks[char] = one, star
        return one, self.star_masks[char]


@frozen
class SearchPattern:
    """An expected text made a pattern: its segments, in order, each found after the one before."""

    expected: str  # as the guide gives it (lines joined by "\n")
    segments: tuple[_Segment, ...]

    def found_in(self, actual: str) -> bool:
        """search_matches with this pattern, made once for many texts."""
        return _search([_normal_text(actual)], self)


def search_pattern(expected: str) -> SearchPattern:
    """EXPECTED as the pattern the reference makes of it: `D.D.x` a version, a word `xxx` a run of non-blank,
    non-comma characters, `...` any text (`....` is any text then a dot: they are taken left to right)."""
    segments: list[list[_Item]] = [[]]
    for placeholder, text in expected_runs(expected):
        if not placeholder:
            segments[-1] += [_Item(_Class.CHAR, char, False) for char in text]
        elif text == _ANY:
            segments.append([])
        else:
            segments[-1] += _version() if _VERSION.fullmatch(text) else _run(_Class.WORD)
    return SearchPattern(expected, tuple(_segment(items) for items in segments if items))


def expected_runs(expected: str) -> Iterator[tuple[bool, str]]:
    """EXPECTED cut as search_pattern reads it, in order: (True, placeholder) for `...`, a version `1.2.x` or a word
    `xxx`, (False, text) for the literal text between them (never empty)."""
    marks = sorted(
        [(m.start(), m.end()) for m in _VERSION.finditer(expected)]
        + [(m.start(), m.end()) for m in _WORD.finditer(expected)]
    )
    position = 0
    for start, end in [*marks, (len(expected), len(expected))]:
        for index, part in enumerate(expected[position:start].split(_ANY)):
            if index:
                yield True, _ANY
            if part:
                yield False, part
        if start < end:
            yield True, expected[start:end]
        position = end


def as_expected(text: str) -> str:
    """TEXT written as an expected text that the search finds in TEXT itself: a version such as `8.0.x` written
    out (which would read as digits) becomes `8.0...`; `...` and `xxx` find themselves as they are."""
    return _VERSION.sub(lambda found: found.group(0)[:-2] + _ANY, text)


def _version() -> list[_Item]:
    dot = _Item(_Class.CHAR, ".", False)
    return [*_run(_Class.DIGIT), dot, *_run(_Class.DIGIT), dot, *_run(_Class.DIGIT)]


def _segment(items: list[_Item]) -> _Segment:
    plain = [item.char for item in items[: next((i for i, it in enumerate(items) if it.kind is not _Class.CHAR), None)]]
    return _Segment(tuple(items), "".join(plain), literal=len(plain) == len(items))


def search_matches(actual: str, expected: str) -> bool:
    """True when EXPECTED (the fence's lines joined by "\\n") is found anywhere in ACTUAL, the step's output."""
    return _search([_normal_text(actual)], search_pattern(expected))


def search_file(path: str, expected: str, *, window_chars: int = WINDOW_CHARS) -> bool:
    """search_matches on the output in the file at PATH (UTF-8, undecodable bytes replaced), read in windows of
    WINDOW_CHARS characters: memory stays bounded, whatever the output's size."""
    return _search(_normal_windows(path, window_chars), search_pattern(expected))


def _normal_text(text: str) -> str:
    """TEXT with every line break "\\n" and the last one dropped: "\\n".join(text.splitlines())."""
    return "\n".join(text.splitlines())


def _normal_windows(path: str, window_chars: int) -> Iterator[str]:
    """The file's text in windows, normalised as _normal_text would normalise it whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held = ""  # a "\r" that may begin a "\r\n", and a last "\n" that may be the text's last
    with open(path, "rb") as handle:
        while True:
            raw = handle.read(window_chars)
            text = held + decoder.decode(raw, final=not raw)
            if not raw:
                text = text.replace("\r\n", "\n").translate(_LINE_BREAKS)
                yield text[:-1] if text.endswith("\n") else text
                return
            cut = len(text) - 1 if text.endswith("\r") else len(text)
            done = text[:cut].replace("\r\n", "\n").translate(_LINE_BREAKS)
            keep = len(done) - 1 if done.endswith("\n") else len(done)
            held = done[keep:] + text[cut:]
            yield done[:keep]


def _search(windows: Iterable[str], pattern: SearchPattern) -> bool:
    """Whether the segments are found in order in the text the windows hold, each where it ends earliest."""
    segments = iter(pattern.segments)
    segment = next(segments, None)
    state = 0
    if segment is None:
        return True
    for window in windows:
        at = 0
        while segment is not None:
            found, state = _scan(segment, window, at, state)
            if found is None:
                break
            segment, state, at = next(segments, None), 0, found
        if segment is None:
            return True
    return False


def _scan(segment: _Segment, text: str, at: int, state: int) -> tuple[int | None, int]:
    """Where in TEXT (from AT) the segment's earliest-ending match ends, or None, and the positions under way at
    the window's end (STATE: those under way at its start)."""
    if segment.literal and state == 0:
        found = text.find(segment.prefix, at)
        if found >= 0:
            return found + len(segment.prefix), 0
        return None, _tail_state(segment, text, max(at, len(text) - len(segment.prefix) + 1))
    return _step(segment, text, at, state)


def _tail_state(segment: _Segment, text: str, start: int) -> int:
    """The positions under way at TEXT's end when none was before START: the tail a window ends in may begin a match."""
    return _step(segment, text, start, 0)[1]


def _step(segment: _Segment, text: str, at: int, state: int) -> tuple[int | None, int]:
    """The automaton, one character at a time from AT, a new match begun at every character."""
    accept = 1 << len(segment.items)
    stars = segment.stars
    prefix = segment.prefix
    first = segment.items[0]
    index = at
    end = len(text)
    while index < end:
        if state == 0:  # nothing under way: skip to where a match can begin
            if not prefix:
                index = _class_start(first, text, index)
                if index < 0:
                    return None, 0
            else:  # not found whole: the window's tail may still begin one that the next window ends
                found = text.find(prefix, index)
                index = found if found >= 0 else max(index, end - len(prefix) + 1)
                if index >= end:
                    return None, 0
        state |= 1  # a match may begin here
        one, star = segment.masks(text[index])
        state = ((state & one) << 1) | (state & star)
        state |= (state & stars) << 1  # a star may be passed without a character
        index += 1
        if state & accept:
            return index, 0
    return None, state & (accept - 1)


def _class_start(item: _Item, text: str, at: int) -> int:
    """The first index from AT whose character ITEM accepts, -1 if none."""
    pattern = _DIGIT_START if item.kind is _Class.DIGIT else _WORD_START
    found = pattern.search(text, at)
    return found.start() if found else -1


_DIGIT_START = re.compile(r"\d")
_WORD_START = re.compile(r"[^,\s]")
