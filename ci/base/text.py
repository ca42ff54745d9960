"""Text every reporter can show safely: cleaned of what a log would hide or obey, masked, sized and counted.

What is shown is masked by the run's policy (ci.base.masking.policy): a
writer calls `clean_text`, and a cut made here (`text_head`) never falls
inside a secret, so that the stages before the writers need not know it.
"""

from __future__ import annotations

import re

from ci.base.masking import (
    MASK,
    NO_SECRETS,
    Masker,
    installed,
    is_maskable,
    is_secret_name,
    masked,
    policy,
    secret_values,
)

__all__ = [
    "FULL_LIMIT_BYTES",
    "MARKER_SCAN_BYTES",
    "MASK",
    "NO_SECRETS",
    "SHOWN_TEXT_BYTES",
    "Masker",
    "clean_text",
    "clean_unmasked",
    "error_line",
    "escape_undecodable",
    "escape_undecodable_json",
    "first_control",
    "hidden_characters",
    "human_size",
    "installed",
    "is_maskable",
    "is_secret_name",
    "masked",
    "masked_to_show_hidden",
    "partial_escape_start",
    "plural",
    "policy",
    "secret_values",
    "show_hidden",
    "text_head",
    "utf8_size",
    "without_hidden",
]

FULL_LIMIT_BYTES = 256 * 1024  # up to this size a stream may be shown in full
HEAD_BYTES = 8 * 1024
TAIL_BYTES = 16 * 1024
HEAD_LINES = 40
TAIL_LINES = 80
SHOWN_TEXT_BYTES = 16 * 1024  # a stored value or an expected body up to this size is shown whole, else its head
MARKER_SCAN_BYTES = 8 * 1024 * 1024  # error markers are looked for in a stream's first and last this much

# 7-bit escape sequences, and their 8-bit forms (U+009B CSI, U+009D OSC) that terminals obey too
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
    r"|\x9b[0-?]*[ -/]*[@-~]|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
)
# what may be the start of one of those (or of a CRLF) at the end of a read: complete once the next read comes
_PARTIAL_ESCAPE = re.compile(
    r"(?:\r|\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?)?|\x9b[0-?]*[ -/]*|\x9d[^\x07\x1b\x9c]*\x1b?)\Z"
)
_PARTIAL_ESCAPE_CHARS = 256  # an escape sequence left open longer than this is shown as text, as clean_text does
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# C1 controls and bidirectional overrides and isolates: they make a log show text other than what is
# there (a reversed command line, a hidden part), so they are shown as what they are: <U+202E>
_DECEPTIVE = re.compile("[\x80-\x9f\u202a-\u202e\u2066-\u2069]")
_XML_INVALID = re.compile("[\ud800-\udfff\ufffe\uffff]")
# what clean_text takes out of a log (a carriage return it turns into a line break)
_HIDDEN = re.compile(f"{_ANSI.pattern}|\\r|{_CONTROL.pattern}")
_HIDDEN_NAMES = {"\r": "carriage return", "\x00": "NUL", "\x1b": "escape", "\x7f": "delete"}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _undecodable(found: re.Match[str], backslash: str) -> str:
    """A byte that was not UTF-8 (os.fsdecode's U+DC80-U+DCFF) as BACKSLASH + `xNN`; any other character U+FFFD."""
    code = ord(found.group())
    return f"{backslash}x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def escape_undecodable(text: str) -> str:
    """TEXT with each byte that was not UTF-8 written as `\\xNN`: text that any UTF-8 file or console can hold.

    Names from the OS (a file name, a path, an argument) reach Python with
    such bytes as lone surrogates (os.fsdecode); `guide-\\xff.md` then shows
    the name as it is on disk. Any other lone surrogate becomes U+FFFD.
    """
    return _LONE_SURROGATE.sub(lambda found: _undecodable(found, "\\"), text)


def escape_undecodable_json(json_text: str) -> str:
    """escape_undecodable for the text of a JSON document (dumped with ensure_ascii=False).

    A lone surrogate there can only be inside a string, where the backslash
    of `\\xNN` is written `\\\\`: the string then reads back as `\\xNN`.
    """
    return _LONE_SURROGATE.sub(lambda found: _undecodable(found, "\\\\"), json_text)


def clean_text(text: str, masker: Masker | None = None) -> str:
    """Text safe for a log, XML or JSON: secrets masked; no ANSI escapes, control characters or lone surrogates.

    The secrets are the run's policy's (ci.base.masking.policy), or MASKER's
    when given. C1 controls and bidirectional overrides are written as
    `<U+XXXX>`; a byte that was not UTF-8 (in a name from the OS) as `\\xNN`
    (escape_undecodable).
    """
    return (policy() if masker is None else masker).mask(clean_unmasked(text))


def clean_unmasked(text: str) -> str:
    """`clean_text` without the masking: for text searched, cut or read on before it is shown (and masked then)."""
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = _DECEPTIVE.sub(lambda found: f"<U+{ord(found.group()):04X}>", text)
    return _XML_INVALID.sub(lambda found: _undecodable(found, "\\"), text)


def partial_escape_start(text: str) -> int:
    """Where the end of TEXT (decoded output, before clean_text) may be the start of an escape sequence or a CRLF.

    Output read while a block writes can stop in the middle of one; cleaned in two parts, it would show
    as text (`[31m`) or as two line breaks. len(TEXT) when its end starts none.
    """
    tail = text[-_PARTIAL_ESCAPE_CHARS:]
    found = _PARTIAL_ESCAPE.search(tail)
    return len(text) if found is None else len(text) - len(tail) + found.start()


def _escaped(hidden: str) -> str:
    """A hidden sequence as visible text: `\\r`, `\\x1b[31m`, `\\x00`."""
    return "".join(
        "\\r" if char == "\r" else (f"\\x{ord(char):02x}" if char < " " or "\x7f" <= char <= "\x9f" else char)
        for char in hidden
    )


def show_hidden(text: str) -> str:
    """TEXT with what `clean_text` would take out of it written as visible escapes, which `clean_text` keeps.

    Escape sequences, carriage returns and other control characters read
    `\\x1b[31m`, `\\r`, `\\x00`.
    """
    return _HIDDEN.sub(lambda found: _escaped(found.group()), text)


def without_hidden(text: str) -> str:
    """TEXT without what `clean_text` would take out of it: how a log shows a line (a carriage return dropped)."""
    return _HIDDEN.sub("", text)


def masked_to_show_hidden(text: str, masker: Masker | None = None) -> str:
    """TEXT masked (by the run's policy, or MASKER) so that writing out what a log hides (`show_hidden`, `repr`)
    shows no secret.

    A secret cut in two by an escape sequence (`grep --color` highlighting part
    of it) is whole once a log drops the escape, and masked there; written out,
    its parts would show around `\\x1b[01;31m`. Such a TEXT is masked as a log
    shows it, without what it hides.
    """
    masker = policy() if masker is None else masker
    masked = masker.mask(text)
    shown = without_hidden(masked)
    remasked = masker.mask(shown)
    return remasked if remasked != shown else masked


def hidden_characters(text: str) -> list[str]:
    """What of TEXT a log hides, each once, in order, as `show_hidden` writes it and named: `\\r (carriage return)`.

    TEXT is masked by the run's policy first: what a log hides inside a secret is never written out.
    """
    named = []
    for hidden in dict.fromkeys(found.group() for found in _HIDDEN.finditer(policy().mask(text))):
        name = _HIDDEN_NAMES.get(hidden, "escape sequence" if len(hidden) > 1 else "control character")
        named.append(f"{_escaped(hidden)} ({name})")
    return named


def first_control(text: str) -> str | None:
    """The first ASCII control character of TEXT, tab and line breaks included (what no git ref and no line of a
    systemd unit holds); None when it has none."""
    found = _ANY_CONTROL.search(text)
    return found.group() if found else None


_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def human_size(size_bytes: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def error_line(message: str) -> str:
    """MESSAGE as an `[ERROR]` line: the one form in which the harness says what went wrong (ci.cli's print_error
    prints it, and so do the stages below the commands, which may not import ci.cli)."""
    return f"[ERROR] {message}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 block`, `2 blocks`, `0 blocks`: COUNT and NOUN, in the plural (NOUNS, else NOUN + s) unless COUNT is 1."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def utf8_size(text: str) -> int:
    """TEXT's size in UTF-8 (a lone surrogate, which a `--set` value may hold, counted as 3 bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def text_head(text: str, limit_bytes: int = SHOWN_TEXT_BYTES) -> str | None:
    """The head a report shows of a TEXT longer than LIMIT_BYTES in UTF-8; None when it is not longer.

    At most LIMIT_BYTES, ending at a line end when one falls in its second
    half, and never inside one of the run's secrets (the policy's; the cut
    moves back to its start), so that masking the head hides each secret whole.
    """
    if len(text) * 4 <= limit_bytes or utf8_size(text) <= limit_bytes:
        return None
    raw = text[:limit_bytes].encode("utf-8", "surrogatepass")[:limit_bytes]
    try:
        head = text[: len(raw.decode("utf-8", "surrogatepass"))]
    except UnicodeDecodeError as exc:  # the bytes cut a character in two: end before it
        head = text[: len(raw[: exc.start].decode("utf-8", "surrogatepass"))]
    line_end = head.rfind("\n")
    if line_end >= len(head) // 2:
        head = head[:line_end]
    # only the part a secret starting before the cut can reach: no search runs through the whole text
    masker = policy()
    return text[: masker.clear_cut(text[: len(head) + masker.longest_chars], len(head))]
