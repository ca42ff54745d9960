"""Secrets: which variables are secret, the forms a secret value takes in output, and the one masker of them all.

Every writer (the console, JUnit, results.json, the annotations, the step
summary, --mask-files, --update, the names of collected files) goes through
one `Masker`: the run's policy, installed once by the command (`installed`)
and asked for where text leaves the program (`policy`, `masked`), never
handed through the stages. It knows each secret in every form a block may print it in:
the value (without the blanks at its ends, CRLF as LF), each line of a value
of several lines, its percent-encoded, JSON-escaped, XML-escaped and
backslash-quoted forms, and the parts of its base64 (standard and URL-safe)
that it alone decides, at each of the three alignments a value can have
inside longer base64 text: the forms GitHub's runner masks, and a few more.
All forms are found in one pass over the text, overlapping ones included, and
every character any occurrence covers is masked: two secrets that overlap
leave no half of either. A secret cut in two by escape sequences or control
characters (`grep --color`) is found through them.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import html
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import AnyStr
from urllib.parse import quote, quote_plus

from ci.base import frozen

__all__ = [
    "MASK",
    "MIN_PLAIN_SECRET_CHARS",
    "MIN_SECRET_CHARS",
    "NO_SECRETS",
    "Masker",
    "installed",
    "is_maskable",
    "is_secret_name",
    "masked",
    "policy",
    "secret_forms",
    "secret_values",
]

MASK = "***"
# Shorter values would mask every "1024" or "false" in the log (and, registered with ::add-mask::, in the whole
# Actions job): no real secret is that short. The same goes for each line of a value of several lines.
MIN_SECRET_CHARS = 6
# A value of letters only, or of digits only, is masked from this length on: below it, it reads as a word or a
# number the log needs (`offline`, `production`, `1700000000`); a 20-letter password or a 16-digit token is masked.
MIN_PLAIN_SECRET_CHARS = 12
_PLAIN_VALUE = re.compile(r"[A-Za-z]+|[-+]?[0-9][0-9.,_]*")
_SECRET_SUFFIXES = ("_TOKEN", "_SECRET", "_KEY")  # with the whole word alone: TOKEN, SECRET, KEY
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")
# What a log does not show between the characters of a secret: escape sequences (an OSC is bounded, so that an
# unterminated one cannot make a search quadratic) and control characters other than tab, line feed and CR.
_ESCAPES = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)|[@-Z\\-_])"
_CONTROLS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
# a run of them but ESC, taken at once: a file of NULs (a sparse file) is scanned some ten times as fast as one
# control at a time; ESC is tried as an escape first, as before
_CONTROL_RUN = r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]+"
_HIDDEN_TEXT = re.compile(f"(?:{_ESCAPES}|{_CONTROL_RUN}|\\x9b[0-?]*[ -/]*[@-~]|{_CONTROLS})+")
_HIDDEN_BYTES = re.compile(f"(?:{_ESCAPES}|{_CONTROL_RUN}|{_CONTROLS})+".encode())
# A secret at a window's end is held for the next window with up to this much of what a log hides inside it.
_HIDDEN_SLACK = 4096
_NOT_ESCAPED_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # a lone surrogate that os.fsdecode does not make


def is_secret_name(name: str) -> bool:
    """Whether a variable is secret by convention: *_TOKEN, *_SECRET, *_KEY, *PASSWORD* (any case)."""
    upper = name.upper()
    if "PASSWORD" in upper:
        return True
    return any(upper.endswith(suffix) or upper == suffix[1:] for suffix in _SECRET_SUFFIXES)


def is_maskable(value: str) -> bool:
    """Whether a value can be masked without ruining the log: at least MIN_SECRET_CHARS long (blanks at its ends
    aside), and a plain word or number (letters only, digits only) at least MIN_PLAIN_SECRET_CHARS."""
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        return False
    return len(value) >= MIN_PLAIN_SECRET_CHARS or _PLAIN_VALUE.fullmatch(value) is None


def secret_values(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> list[str]:
    """Values of the variables secret by name (`is_secret_name`) or named in EXTRA_NAMES, that can be masked."""
    named = set(extra_names)
    values = [value for name, value in env.items() if (is_secret_name(name) or name in named) and secret_forms(value)]
    return sorted(set(values), key=len, reverse=True)


def _encoded(value: str) -> bytes:
    """VALUE as a file holds it: UTF-8, and a byte an env value had that was not UTF-8 as that byte."""
    return value.encode("utf-8", "surrogatepass" if _NOT_ESCAPED_BYTE.search(value) else "surrogateescape")


def _base64_parts(value: str) -> set[str]:
    """The base64 text (standard and URL-safe) that VALUE alone decides, wherever it stands in longer base64 text.

    Base64 writes 6 bits a character: a value that starts at one of the 3 byte offsets of a 3-byte group gives
    different characters, and its first and last character may mix in its neighbours' bits; those are left out.
    """
    import base64  # only a run with secrets needs it

    raw = _encoded(value)
    parts = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}  # the value alone, padded
    for shift in range(3):
        first = -(-8 * shift // 6)  # the first character whose 6 bits are all the value's
        last = 8 * (shift + len(raw)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            parts.add(encode(b"\0" * shift + raw + b"\0\0").decode()[first:last])
    return parts


def _escaped_forms(value: str) -> set[str]:
    """VALUE as the usual encoders write it: percent-encoded, JSON, XML, quoted for a command line; base64."""
    raw = _encoded(value)
    percent = {quote(raw, safe=""), quote(raw, safe="/"), quote_plus(raw, safe="")}
    percent |= {_PERCENT_ESCAPE.sub(lambda found: found.group().lower(), form) for form in percent}
    as_json = json.dumps(value)[1:-1]
    json_forms = {as_json, json.dumps(value, ensure_ascii=False)[1:-1], as_json.replace("/", "\\/")}
    quoted = {html.escape(value, quote=True), html.escape(value, quote=False), value.replace('"', '\\"')}
    return percent | json_forms | quoted | _base64_parts(value)


def secret_forms(value: str) -> set[str]:
    """Every form of VALUE a masker looks for: empty when VALUE cannot be masked (`is_maskable`).

    The value without the blanks at its ends (most commands print it without its newline), with CRLF as LF;
    and, for a value of several lines, each line that `is_maskable` alone, as GitHub's runner does; each of
    them also as encoders write it (`_escaped_forms`), in forms of at least MIN_SECRET_CHARS characters.
    """
    whole = _LINE_BREAK.sub("\n", value)
    bases = {value.strip(), whole.strip()}
    if "\n" in whole:
        bases.update(line.strip() for line in whole.split("\n"))
    forms: set[str] = set()
    for base in bases:
        if is_maskable(base):
            forms.add(base)
            forms.update(form for form in _escaped_forms(base) if len(form) >= MIN_SECRET_CHARS)
    return forms


def _occurrences(text: AnyStr, forms: tuple[AnyStr, ...]) -> Iterator[tuple[int, int]]:
    """Where each form occurs in TEXT, overlapping occurrences included, as (start, end)."""
    for form in forms:
        at = text.find(form)
        while at != -1:
            yield at, at + len(form)
            at = text.find(form, at + 1)


def _seen_through(text: AnyStr, forms: tuple[AnyStr, ...], hidden: re.Pattern[AnyStr]) -> Iterator[tuple[int, int]]:
    """Occurrences of the forms in TEXT as a log shows it (without what HIDDEN matches), as spans of TEXT."""
    pieces: list[tuple[int, int]] = []  # the visible runs of TEXT
    at = 0
    for found in hidden.finditer(text):
        if found.start() > at:
            pieces.append((at, found.start()))
        at = found.end()
    if not pieces and at == 0:
        return
    if at < len(text):
        pieces.append((at, len(text)))
    view = text[:0].join(text[start:end] for start, end in pieces)
    starts = list(_running_starts(pieces))

    def raw(index: int) -> int:
        piece = bisect.bisect_right(starts, index) - 1
        return pieces[piece][0] + index - starts[piece]

    for start, end in _occurrences(view, forms):
        yield raw(start), raw(end - 1) + 1


def _running_starts(pieces: list[tuple[int, int]]) -> Iterator[int]:
    total = 0
    for start, end in pieces:
        yield total
        total += end - start


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans joined, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _rendered(text: AnyStr, spans: list[tuple[int, int]], mask: AnyStr, *, continued: bool = False) -> AnyStr:
    """TEXT with each span replaced by MASK; with CONTINUED, a span at its start goes on one already masked."""
    parts: list[AnyStr] = []
    at = 0
    for start, end in spans:
        parts.append(text[at:start])
        if not (continued and start == 0):
            parts.append(mask)
        at = end
    parts.append(text[at:])
    return text[:0].join(parts)


@frozen
class Masker:
    """Replaces a run's secrets, in every form, by *** in what its reports show; made once by the command."""

    secrets: tuple[str, ...] = ()  # every form of every secret (`secret_forms`), longest first
    # the values as given (without the blanks at their ends), and each line of one of several lines that can be
    # masked alone: what ::add-mask:: registers, GitHub's runner adding the encoded forms itself
    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Masker:
        """A masker for these values in all their forms (`secret_forms`); what cannot be masked is left out."""
        forms: set[str] = set()
        given: set[str] = set()
        for value in values:
            found = secret_forms(value)
            forms |= found
            given |= {part.strip() for part in (value, *value.splitlines()) if part.strip() in found}
        return cls(_longest_first(forms), _longest_first(given))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The parts of TEXT that hold a secret, overlapping occurrences joined, in order."""
        return self._spans(text, self.secrets, _HIDDEN_TEXT)

    def mask(self, text: str) -> str:
        """TEXT with every part that holds a secret replaced by *** (one *** for overlapping ones)."""
        return _rendered(text, self.spans(text), MASK) if self.secrets else text

    def holds_secret(self, text: str) -> bool:
        """Whether TEXT holds a secret in any form."""
        return bool(self.secrets) and bool(self.spans(text))

    @staticmethod
    def _spans(text: AnyStr, forms: tuple[AnyStr, ...], hidden: re.Pattern[AnyStr]) -> list[tuple[int, int]]:
        if not forms:
            return []
        found = list(_occurrences(text, forms))
        if hidden.search(text):
            found.extend(_seen_through(text, forms, hidden))
        return _merged(found)

    @functools.cached_property
    def secret_bytes(self) -> tuple[bytes, ...]:
        """The forms as a file holds them, longest first."""
        return tuple(sorted({_encoded(value) for value in self.secrets}, key=len, reverse=True))

    def mask_bytes(self, data: bytes) -> bytes:
        """`mask` for bytes (a file's, maybe not UTF-8): each secret's bytes replaced by ***, the other bytes kept."""
        return _rendered(data, self._spans(data, self.secret_bytes, _HIDDEN_BYTES), MASK.encode())

    def masked_windows(self, reads: Iterable[bytes]) -> Iterator[tuple[bytes, bytes]]:
        """READS (a file's consecutive chunks) as consecutive (bytes, masked) pairs, masked as the whole would be.

        A window's end that may hold the start of a secret waits for the next read; a masked part that runs
        past a window's end goes on in the next one (no second ***). Memory stays at about one read.
        """
        overlap = max((len(value) for value in self.secret_bytes), default=1) - 1
        carry, covered = b"", 0
        for chunk in [*_chunks(reads), b""]:
            buffer = carry + chunk
            spans = self._spans(buffer, self.secret_bytes, _HIDDEN_BYTES)
            if covered:
                spans = _merged([(0, covered), *spans])
            cut = len(buffer) if not chunk else _safe_cut(buffer, overlap)
            if cut == 0:  # all of it may still be part of a secret: the next read decides
                carry = buffer
                continue
            shown = [(start, min(end, cut)) for start, end in spans if start < cut]
            yield buffer[:cut], _rendered(buffer[:cut], shown, MASK.encode(), continued=covered > 0)
            covered = next((end - cut for start, end in spans if start < cut < end), 0)
            carry = buffer[cut:]

    @property
    def longest_chars(self) -> int:
        """The length of the longest form (0 for none)."""
        return len(self.secrets[0]) if self.secrets else 0

    @property
    def longest_bytes(self) -> int:
        """The UTF-8 size of the longest form (0 for none): how much a cut must read beyond itself."""
        return len(self.secret_bytes[0]) if self.secret_bytes else 0

    def clear_cut(self, text: str, cut: int, *, forward: bool = False) -> int:
        """CUT (an index into TEXT) moved off any secret it falls inside: back to its start, or FORWARD to its end."""
        for start, end in self.spans(text):
            if start < cut < end:
                return end if forward else start
        return cut

    def partial_secret_start(self, text: str) -> int:
        """Where the end of TEXT may be the start of a secret whose rest is still to come (len(TEXT) if nowhere)."""
        earliest = len(text)
        for form in self.secrets:
            at = text.find(form[0], max(len(text) - len(form) + 1, 0))
            while at != -1 and at < earliest:
                if form.startswith(text[at:]):
                    earliest = at
                    break
                at = text.find(form[0], at + 1)
        return earliest


def _longest_first(texts: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(texts, key=lambda text: (-len(text), text)))


def _chunks(reads: Iterable[bytes]) -> Iterator[bytes]:
    """The non-empty reads, up to the first empty one (the end of the file)."""
    for chunk in reads:
        if not chunk:
            return
        yield chunk


def _safe_cut(buffer: bytes, overlap: int) -> int:
    """Where BUFFER can end a window: before its last OVERLAP bytes a log shows (and what it hides among them)."""
    cut = max(len(buffer) - overlap, 0)
    tail = buffer[max(cut - _HIDDEN_SLACK, 0) :]
    if not _HIDDEN_BYTES.search(tail):
        return cut
    visible = 0
    at = len(tail)
    for found in reversed(list(_HIDDEN_BYTES.finditer(tail))):  # walk back over OVERLAP visible bytes
        run = at - found.end()
        if visible + run >= overlap:
            return len(buffer) - len(tail) + at - (overlap - visible)
        visible += run
        at = found.start()
    return max(len(buffer) - len(tail) + at - (overlap - visible), 0)


NO_SECRETS = Masker()  # for text that holds no run's output (guides, drift reports): nothing to mask


# The run's one masking policy: what every writer masks. A module-level value, not a context variable, so that the
# threads a run starts (the live console's) see the run's policy; installed for the span of a command or a run.
_policy: Masker = NO_SECRETS
_installing = threading.Lock()


def policy() -> Masker:
    """The masking policy installed now (`installed`): the run's secrets; NO_SECRETS outside any."""
    return _policy


def masked(text: str) -> str:
    """TEXT with the secrets of the policy installed now masked (`Masker.mask`)."""
    return _policy.mask(text)


@contextlib.contextmanager
def installed(masker: Masker) -> Iterator[Masker]:
    """MASKER as the policy every writer masks by while the block lasts; the one before it again after, however
    the block ends (a command run twice in one process, a test, starts from the policy it found)."""
    global _policy
    with _installing:
        before, _policy = _policy, masker
    try:
        yield masker
    finally:
        with _installing:
            _policy = before
