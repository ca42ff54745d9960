"""Parsing: Markdown guide text -> labelled blocks with their source lines."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

from ci.base import frozen
from ci.guide.model import Block, Label, Param, Problem, closest

__all__ = [
    "NearLabel",
    "ParsedGuide",
    "ascii_form",
    "full_width_language",
    "near_miss_of",
    "parse_guide",
    "split_info",
]

LABELS = {label.value: label for label in Label}

_KEY_VALUE = re.compile(r"([A-Za-z_][\w-]*)=(?:\"(.*)\"|'(.*)')\Z", re.DOTALL)
_COMMENT = re.compile(r"<!--(.*?)(?:-->|\Z)", re.DOTALL)
# A line that opens a labelled fence, whatever quotes or list markers stand before it
_LABELLED_FENCE = re.compile(r"(?:```|~~~)[^`\n]*?(?<!\S)#test(?:-setup|-result)?(?!\S)", re.MULTILINE)
# A line that would open a labelled fence, at the start of a line (after quote and list markers)
_FENCE_LIKE = re.compile(r"[ \t]{0,3}(?:>[ \t]?|(?:[-*+]|\d{1,9}[.)])[ \t]+)*(`{3,}|~{3,})(.*)")
_OPENS_FRONT_MATTER = re.compile(r"---[ \t]*(?:\r?\n|\Z)")
_MAX_NESTING = 20  # markdown-it's CommonMark limit on nested quotes and lists (a list level takes two)
# The line breaks of CommonMark, which markdown-it counts its lines by: a lone CR ends a line too
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@frozen
class NearLabel:
    """A fence ignored for a word that looks like a misspelt label (`#test-results`): an error, or a warning."""

    line: int  # 1-based line of the fence
    word: str  # as written
    meant: str | None  # the label it is most like, if one is close
    block_id: str | None  # its id="..." as written, so that a #test missing its result can name it
    problem: Problem  # the error or warning given for it (a warning is left out when an error says the same)
    error: bool  # a near miss of a label (`#tset`, `#Test`): a document error, not a warning


@frozen
class ParsedGuide:
    """The raw material of a plan: labelled blocks, front matter, and what was wrong."""

    file: str  # the guide as the user named it
    blocks: tuple[Block, ...]  # labelled fences in document order, hidden ones included
    front_matter: str | None  # YAML text between the `---` lines, if any
    front_matter_line: int  # 1-based line of the opening `---`
    problems: tuple[Problem, ...]  # syntax errors: unterminated quotes, words before the label, ...
    warnings: tuple[Problem, ...]  # legal but suspicious: words like `#testing` on a fence, fences never closed
    near_labels: tuple[NearLabel, ...] = ()  # the fences ignored for a misspelt label, each an error or a warning


def split_info(info: str) -> tuple[list[tuple[str, int]], str | None]:
    """Split a fence info string into words, keeping quoted values whole.

    Returns the words with their 0-based columns, and an error message for the
    first mistake in the quotes, so that each is reported once. A quote left
    open is read as closed where the next `key=` or flag starts (else at the
    end), so the words after it are still parameters; a quote typed once too often
    (`id="c""`, a lone `"`) is left out; a value holding the quote it is
    quoted with (`skip='it's late'`) is read whole; a closing quote with no
    opening one (`id=c"`) leaves an unquoted value, which planning reports.
    """
    words: list[tuple[str, int]] = []
    error: str | None = None
    position = 0
    length = len(info)
    while position < length:
        while position < length and info[position].isspace():
            position += 1
        if position >= length:
            break
        start = position
        closed_at = start  # where the last value closed by its quote ends: a quote right there opens nothing
        closed_by = ""  # the quote added to a value whose quote is never closed
        stray = 0  # 1 when the word ends in a quote typed once too often, left out of it
        while position < length and not info[position].isspace():
            typed_quote = info[position] in _TYPED_QUOTES and info[position - 1 : position] in ("=", _FULL_WIDTH_EQUALS)
            ends_word = position + 1 == length or info[position + 1].isspace()
            if info[position] in "\"'" and ends_word and position == closed_at:
                # `id="c""`, `id="c"'`, a lone `"`: a quote typed once too often; dropped, the mistake said once
                after = f"after {info[start:position]!r}" if position > start else "among the parameters"
                error = error or f"stray {info[position]} {after}: remove it"
                position, stray = position + 1, 1
                break
            if info[position] in "\"'" and ends_word and info[position - 1] != "=" and _KEY_START.match(info, start):
                position += 1  # `id=c"`: a closing quote with no opening one, an unquoted value, said as such
                continue
            if info[position] in "\"'" or typed_quote:
                quote = _TYPED_QUOTES.get(info[position], info[position])
                closing = _closing_quote(info, position, quote)
                if closing < 0:
                    end = _unclosed_value_end(info, position + 1)
                    if info[position + 1 : end].strip():  # `id="` alone: planning says the value is empty, the fix
                        error = error or f"unterminated quote in {info[start:end].rstrip()!r}: close it with {quote}"
                    position, closed_by = end, quote
                    break
                other = "'" if quote == '"' else '"'
                value = info[position + 1 : closing]
                # `skip='it's late'`: the quote is in the value, which the other quote would hold; a value holding
                # both (`id='say "hi" 'there''`) can be written no other way, and is read whole
                if info.find(quote, position + 1) < closing and other not in value:
                    meant = f"{info[start:position]}{other}{value}{other}"
                    error = error or f"{info[start : closing + 1]!r} holds the {quote} it is quoted with: write {meant}"
                position = closed_at = closing + 1
                glued = _KEY_START.match(info, position)
                # `id="a"store="b"`: two parameters, one space short; read as two, the mistake said once
                if glued and _KEY_VALUE.match(info[start:position]):
                    error = error or (
                        f"{info[start:position]!r} runs into the next parameter: put a space before {glued.group(1)}="
                    )
                    break
            else:
                position += 1
        if position - stray > start:
            words.append((info[start : position - stray].rstrip() + closed_by, start))
    return _spaced_equals(words, error)


_KEY_START = re.compile(r"([A-Za-z_][\w-]*)=")
_ENDS_WITH_KEY = re.compile(r"\s[A-Za-z_][\w-]*=\Z")
_BARE_KEY = re.compile(r"[A-Za-z_][\w-]*\Z")


def _spaced_equals(words: list[tuple[str, int]], error: str | None) -> tuple[list[tuple[str, int]], str | None]:
    """WORDS with each parameter written with spaces around its `=` (`id = "a"`, `id= "a"`, `id ="a"`) made one
    word again, so that the one mistake is one error (ERROR, unless one is said already) naming the fix."""
    joined: list[tuple[str, int]] = []
    index = 0
    while index < len(words):
        texts = [word for word, _ in words[index : index + 3]]
        taken = 0
        if len(texts) >= 3 and _BARE_KEY.match(texts[0]) and texts[1] == "=":
            taken = 3  # id = "a"
        elif len(texts) >= 2 and _BARE_KEY.match(texts[0]) and texts[1].startswith("="):
            taken = 2  # id ="a"
        elif len(texts) >= 2 and texts[0].endswith("=") and _BARE_KEY.match(texts[0][:-1]):
            taken = 2  # id= "a"
        meant = "".join(texts[:taken])
        if taken and meant.partition("=")[2][:1] in ("'", '"'):
            error = error or f"spaces around = in {' '.join(texts[:taken])!r}: write {meant}"
            joined.append((meant, words[index][1]))
            index += taken
        else:
            joined.append(words[index])
            index += 1
    return joined, error


# The quotes an input method types, each with its closing one: read as quotes where a value opens (`id=“a b”`), so
# that the value stays one word and the error names it whole
_TYPED_QUOTES = {
    "\N{LEFT DOUBLE QUOTATION MARK}": "\N{RIGHT DOUBLE QUOTATION MARK}",
    "\N{LEFT SINGLE QUOTATION MARK}": "\N{RIGHT SINGLE QUOTATION MARK}",
    "\N{FULLWIDTH QUOTATION MARK}": "\N{FULLWIDTH QUOTATION MARK}",
    "\N{FULLWIDTH APOSTROPHE}": "\N{FULLWIDTH APOSTROPHE}",
}
_CURLY_QUOTES = str.maketrans(
    {
        "\N{LEFT DOUBLE QUOTATION MARK}": '"',
        "\N{RIGHT DOUBLE QUOTATION MARK}": '"',
        "\N{DOUBLE LOW-9 QUOTATION MARK}": '"',
        "\N{LEFT SINGLE QUOTATION MARK}": "'",
        "\N{RIGHT SINGLE QUOTATION MARK}": "'",
    }
)
_FULL_WIDTH_EQUALS = "\N{FULLWIDTH EQUALS SIGN}"


def ascii_form(text: str) -> str:
    """TEXT as typed in ASCII where an input method gave full-width forms (of `#`, letters, `=`, quotes) or curly
    quotes."""
    return unicodedata.normalize("NFKC", text).translate(_CURLY_QUOTES)


def _closing_quote(info: str, opening: int, quote: str) -> int:
    """Where the value opened at OPENING by a quote closes with QUOTE; -1 when it never does.

    The next QUOTE closes it, unless it is the opening quote of the next parameter (`id="c timeout="5"`: the
    value before it ends with ` timeout=` and text follows it), or an apostrophe in the value
    (`skip='it's late'`: text that starts no parameter follows it; the value then closes at the last QUOTE
    that ends a word before the next parameter).
    """
    closing = info.find(quote, opening + 1)
    if closing < 0 or closing + 1 == len(info) or info[closing + 1].isspace() or info[closing + 1] in "\"'":
        return closing
    if _ENDS_WITH_KEY.search(info, opening + 1, closing):
        return -1
    if _KEY_START.match(info, closing + 1):
        return closing  # `id="a"store="b"`: two parameters glued, said by the caller
    value_end = _unclosed_value_end(info, closing + 1)
    last = info.rfind(quote, closing + 1, value_end)
    return last if last > 0 and (last + 1 == value_end or info[last + 1].isspace()) else closing


def _unclosed_value_end(info: str, value_start: int) -> int:
    """Where a value whose quote is never closed most likely ends: before the next `key=` or flag, else at the
    end."""
    found = _NEXT_KEY.search(info, value_start)
    return found.start() if found else len(info)


def _parse_params(words: list[tuple[str, int]]) -> list[Param]:
    """Turn the words after a label into parameters; planning checks them (an unquoted value among others)."""
    params: list[Param] = []
    for word, column in words:
        pair = _KEY_VALUE.match(word)
        if pair:
            value = pair.group(2) if pair.group(2) is not None else pair.group(3)
            params.append(Param(pair.group(1), value, column))
        elif "=" in word:
            key, _, value = word.partition("=")
            params.append(Param(key, value.strip("\"'"), column, quoted=False))
        else:
            params.append(Param(word, None, column))
    return params


# How far a word may be from a label (letters added, removed, changed or swapped) to be taken for a typo of it:
# one for the short `#test` (`#tset`, `#tests`), two for the longer ones (`#test-resluts`).
_NEAR_MISS_DISTANCE = {"#test": 1, "#test-result": 2, "#test-setup": 2}
_PARAM_KEYS = ("id", "store", "load", "fuzzy", "timeout", "skip", "retry", "retry_delay")
_PARAM_FLAGS = ("disable_fuzzy", "rerun_on_resume")
# Where the next parameter starts: a `key=`, or a flag standing as a word
_NEXT_KEY = re.compile(rf"\s+(?=[A-Za-z_][\w-]*=|(?:{'|'.join(_PARAM_FLAGS)})(?:\s|\Z))")


def near_miss_of(word: str, *, first: bool = False, before_params: bool = False) -> str | None:
    """The label WORD is a near miss of, or None: `#Test`, `#TEST-SETUP`, `#test_setup`, `#testsetup`,
    `#tset`, `#test-results`; and a label written without its `#` (`test-setup`), when it stands after the
    language or before parameters (a lone first word `test` may be a language, as `text` is)."""
    spelt = word.casefold().replace("_", "-")
    if spelt in LABELS:
        return spelt if spelt != word else None
    if not spelt.startswith("#"):
        if first and not before_params:
            return None
        bare = {label[1:].replace("-", ""): label for label in LABELS}
        return bare.get(spelt.replace("-", ""))
    found = min(LABELS, key=lambda label: _distance(spelt, label))
    if _distance(spelt, found) <= _NEAR_MISS_DISTANCE[found] or spelt.replace("-", "") == found.replace("-", ""):
        return found
    return None


def _distance(word: str, other: str) -> int:
    """Edit distance with swaps of neighbours (optimal string alignment): `#tset` is one from `#test`."""
    previous2: list[int] = []
    previous = list(range(len(other) + 1))
    for i, letter in enumerate(word, start=1):
        current = [i]
        for j, other_letter in enumerate(other, start=1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (letter != other_letter))
            if i > 1 and j > 1 and letter == other[j - 2] and word[i - 2] == other_letter:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


def _mistyped_label(word: str, *, first: bool) -> tuple[str, str] | None:
    """The label WORD holds though it is not read as one, with the fix: a label glued to its language
    (`bash#test-setup`, the first word only), or typed in full-width characters (a full-width number sign,
    full-width letters), as a Chinese input method gives them."""
    typed = ascii_form(word)
    language, hash_sign, rest = typed.partition("#")
    glued = near_miss_of(hash_sign + rest) or (hash_sign + rest) if first and language and hash_sign else None
    if glued in LABELS and language.isidentifier():
        return glued, f"did you mean ```{language} {glued}? (a space between the language and the label)"
    if typed != word and "#" in typed and (typed in LABELS or near_miss_of(typed) is not None):
        meant = typed if typed in LABELS else near_miss_of(typed)
        assert meant is not None  # as tested above
        return (
            meant,
            f"did you mean {meant}? (it is typed in full-width characters, as an input method gives: type it in ASCII)",
        )
    return None


def full_width_language(word: str, fence: str, consequence: str) -> str:
    """The problem of a fence whose language WORD is typed in full-width characters (U+FF53 for `s`, and so on),
    as a Chinese input method gives them, so that CONSEQUENCE, with the fix: the fence's opening FENCE in ASCII."""
    return (
        f"the language {word!r} is typed in full-width characters, as an input method gives them, so {consequence}:"
        f" type it in ASCII: ```{fence}"
    )


_OPENING_QUOTES = "\"'" + "".join(_TYPED_QUOTES)
_CLOSING_QUOTES = "\"'" + "".join(_TYPED_QUOTES.values())
# A parameter whose key, `=` or quotes may be typed in full-width forms: its key, `=`, quote, value, quote
_PARAM_AS_TYPED = re.compile(
    f"([^={_FULL_WIDTH_EQUALS}]+)([={_FULL_WIDTH_EQUALS}])([{_OPENING_QUOTES}])(.*)([{_CLOSING_QUOTES}])\\Z", re.DOTALL
)


def _ascii_param(word: str) -> str:
    """A parameter as it should be typed where an input method gave full-width forms of its key, `=` or quotes
    (`id="a"` typed with a full-width `=` or curly quotes); its value is kept as written."""
    found = _PARAM_AS_TYPED.match(word)
    if found is None:
        key, equals, value = word.partition(_FULL_WIDTH_EQUALS) if "=" not in word else word.partition("=")
        return f"{ascii_form(key)}{equals and '='}{value}"
    key, equals, opening, value, closing = found.groups()
    if key == ascii_form(key) and equals == "=" and opening + closing == ascii_form(opening + closing):
        return word
    quote = "'" if '"' in value or ascii_form(opening) == "'" else '"'
    return f"{ascii_form(key)}={quote}{value}{quote}"


def _has_params(words: list[tuple[str, int]]) -> bool:
    """Whether WORDS hold a parameter of a label (`id="x"`, `disable_fuzzy`): what makes a bare `test` a label's."""
    return any(word in _PARAM_FLAGS or ("=" in word and word.split("=", 1)[0] in _PARAM_KEYS) for word, _ in words)


def _unclosed(token: Any) -> bool:
    """Whether a fence token is never closed: it ends where its file, comment, quote or list item ends."""
    first, end = token.map
    content_lines = token.content.count("\n") + (not token.content.endswith("\n") and token.content != "")
    return bool(end - first - 1 == content_lines)  # a closed fence also spans its closing line


class _Collector:
    """Walks markdown-it tokens and gathers labelled blocks, headings and problems."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.blocks: list[Block] = []
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.near_labels: list[NearLabel] = []
        self.heading: str | None = None
        self.read_lines: list[tuple[int, int]] = []  # guide lines the parser read as code: fences, indented code

    def walk(self, tokens: list[Any], text: str, line_offset: int, hidden: bool) -> None:
        """Gather the blocks of TOKENS, parsed from TEXT, whose first line is guide line LINE_OFFSET + 1."""
        for index, token in enumerate(tokens):
            if token.type == "heading_open" and index + 1 < len(tokens):
                self.heading = tokens[index + 1].content.strip() or self.heading
            elif token.type in ("fence", "code_block") and token.map is not None:
                self.read_lines.append((token.map[0] + 1 + line_offset, token.map[1] + line_offset))
                if token.type == "code_block":
                    self.indented(token, line_offset)
            if token.type == "fence" and token.map is not None and hidden and _unclosed(token):
                self.unclosed_in_comment(token, line_offset)
            elif token.type == "fence" and token.map is not None:
                self.fence(token, token.map[0] + 1 + line_offset, hidden)
                self.unterminated(token, line_offset)
            elif token.type == "html_block" and token.map is not None:
                self.html(token.content, token.map[0] + line_offset)
            elif token.nesting == 1 and token.level >= _MAX_NESTING - 1 and token.map is not None:
                self.too_deep(text, token.map, line_offset)

    def indented(self, token: Any, line_offset: int) -> None:
        """Warn of a labelled fence inside an indented code block (four spaces more than its text): Markdown shows
        it as text, and it never runs. A guide may show the label format this way on purpose, so a warning."""
        found = _LABELLED_FENCE.search(token.content)
        if found is None or token.content[: found.start()].rstrip(" \t").rpartition("\n")[2]:
            return  # no labelled fence, or one that does not start its line
        line = token.map[0] + 1 + line_offset + token.content.count("\n", 0, found.start())
        fix = "indent it as the text it belongs to (a list item's text), if it is meant to run"
        message = f"this labelled fence is indented into an indented code block, so it is shown and never run: {fix}"
        self.warnings.append(Problem(self.file, line, message))

    def unclosed_in_comment(self, token: Any, line_offset: int) -> None:
        """A fence never closed inside an HTML comment is an error, as under the reference engine: its block would
        take the rest of the comment, run as a hidden setup no reader sees."""
        first, end = token.map
        self.problems.append(
            Problem(
                self.file,
                first + 1 + line_offset,
                f"this fence inside an HTML comment is never closed, so its block would take the rest of the comment"
                f" (up to line {end + line_offset}): close it with {token.markup} before the comment ends",
            )
        )

    def unterminated(self, token: Any, line_offset: int) -> None:
        """Warn when a fence is never closed: its block silently takes the rest of the file (or of its container)."""
        first, end = token.map
        if not _unclosed(token):
            return
        labelled = any(word in LABELS for word, _ in split_info(token.info)[0])
        if not labelled and not _LABELLED_FENCE.search(token.content):
            return  # an open fence that swallows no labelled block changes nothing the harness runs
        what = "its block runs" if labelled else "the labelled fences after it are read as its text,"
        self.warnings.append(
            Problem(
                self.file,
                first + 1 + line_offset,
                f"this fence is never closed, so {what} up to line {end + line_offset}, where its file, comment, "
                f"quote or list item ends: close it with {token.markup}",
            )
        )

    def too_deep(self, text: str, span: list[int], line_offset: int) -> None:
        """Warn of each labelled fence in a container nested past the parser's limit, which it leaves unread.

        The parser reads nothing of such a container, and past a list item it reads nothing to the end of
        the text, so the warning names the container and how far the unread part runs.
        """
        first, end = span[0] + 1 + line_offset, span[1] + line_offset
        for number, line in enumerate(_LINE_BREAK.split(text)[span[0] : span[1]], start=first):
            if _LABELLED_FENCE.search(line):
                self.warnings.append(
                    Problem(
                        self.file,
                        number,
                        f"this labelled fence is ignored, though GitHub shows it: the quote or list at line {first} "
                        "nests deeper than the harness reads (20 quotes, or 10 list levels), and nothing from there "
                        f"to line {end} is read; nest it less deeply",
                    )
                )

    def html(self, content: str, first_line_index: int) -> None:
        """Re-scan an HTML block: fences inside comments are hidden setups."""
        for comment in _COMMENT.finditer(content):
            inner_start = comment.start(1)
            line_index = first_line_index + content.count("\n", 0, inner_start)
            visible_heading = self.heading  # a heading inside a comment is never seen by readers
            self.walk(_comment_markdown().parse(comment.group(1)), comment.group(1), line_index, hidden=True)
            self.heading = visible_heading

    def near_label(self, words: list[tuple[str, int]], line: int) -> None:
        """A fence ignored for a word like a misspelt label: an error for a near miss (`#tset`, `#Test`,
        `#test_setup`, `test-setup`), a warning for a farther one (`#testing`), each saying which label was meant."""
        for index, (word, _) in enumerate(words):
            labels = "the labels are #test, #test-result and #test-setup, spelt exactly"
            near_miss: str | None
            mistyped = _mistyped_label(word, first=index == 0)
            if mistyped is not None:
                near_miss, fix = mistyped
            else:
                near_miss = near_miss_of(word, first=index == 0, before_params=_has_params(words[index + 1 :]))
                if near_miss is None and not word.startswith(("#test", "#tset")):
                    continue
            meant = near_miss or closest(word, LABELS)
            if mistyped is None:
                fix = f"did you mean {meant}? ({labels})" if meant else f"({labels})"
            if near_miss is not None:
                problem = Problem(self.file, line, f"{word!r} is not a label, so this block would be ignored; {fix}")
                self.problems.append(problem)
            else:
                problem = Problem(self.file, line, f"{word!r} is not a label, so this block is ignored; {fix}")
                self.warnings.append(problem)
            after = [(_ascii_param(word), column) for word, column in words[index + 1 :]]
            block_id = next((p.value for p in _parse_params(after) if p.key == "id"), None)
            self.near_labels.append(NearLabel(line, word, meant, block_id, problem, near_miss is not None))
            return

    def typed_params(self, words: list[tuple[str, int]], line: int) -> list[tuple[str, int]]:
        """The parameters of a label, read as meant; an error for each whose key, `=` or quotes are full-width or
        curly."""
        typed = []
        for word, column in words:
            ascii_word = _ascii_param(word)
            if ascii_word != word:
                self.problems.append(
                    Problem(
                        self.file,
                        line,
                        f"{word!r} is typed with full-width characters or curly quotes, as an input method gives them:"
                        f" type {ascii_word}",
                    )
                )
            typed.append((ascii_word, column))
        return typed

    def fence(self, token: Any, line: int, hidden: bool) -> None:
        words, quote_error = split_info(token.info)
        label_at = next((i for i, (word, _) in enumerate(words) if word in LABELS), None)
        if label_at is None:
            self.near_label(words, line)
            return
        label = LABELS[words[label_at][0]]
        if quote_error:
            self.problems.append(Problem(self.file, line, quote_error))
        if label_at > 1:  # the reference engine reads the first word as the language and ignores the others
            between = " ".join(word for word, _ in words[1:label_at])
            fix = f"```{words[0][0]} {label.value}"
            self.warnings.append(
                Problem(self.file, line, f"{between!r} between the language and {label.value} is ignored: write {fix}")
            )
        params = _parse_params(self.typed_params(words[label_at + 1 :], line))
        if hidden and label is not Label.SETUP:
            self.problems.append(
                Problem(
                    self.file,
                    line,
                    f"{label.value} inside an HTML comment: only #test-setup may be hidden; "
                    "move the block out of the comment",
                )
            )
        self.blocks.append(
            Block(
                label=label,
                language=words[0][0] if label_at >= 1 else None,
                params=tuple(params),
                body=token.content.rstrip("\n"),
                file=self.file,
                line=line,
                heading=self.heading,
                hidden=hidden,
            )
        )


@functools.cache
def _markdown() -> MarkdownIt:
    """The parser, made once: CommonMark with front matter."""
    return MarkdownIt("commonmark", {"maxNesting": _MAX_NESTING}).use(front_matter_plugin)


@functools.cache
def _comment_markdown() -> MarkdownIt:
    """The parser for a comment's text: HTML comments do not nest, so a `<!--` in one is plain text.

    Read as HTML, each `<!--` in a comment opened yet another comment to re-parse, one Python frame
    per line: 500 lines of `<!--` ended the harness in a RecursionError.
    """
    return MarkdownIt("commonmark", {"maxNesting": _MAX_NESTING}).use(front_matter_plugin).disable("html_block")


def _false_fences(text: str, file: str, collector: _Collector) -> list[Problem]:
    """An error for each line that looks like a labelled fence but that the parser did not read as one.

    CommonMark allows no backtick in the info string of a ``` fence (`skip='needs `npu-smi`'`): such a line
    is a paragraph, and the next fence line, meant to close the block, opens one that swallows what follows.
    """
    read = iter(sorted(collector.read_lines))  # walked once beside the lines, which come in order: linear
    span = next(read, None)
    warned = {warning.line for warning in collector.warnings}
    problems = []
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):  # numbered as the parser numbers them
        found = _FENCE_LIKE.match(line)
        if found is None or not any(word in LABELS for word, _ in split_info(found.group(2))[0]):
            continue
        while span is not None and span[1] < number:  # the spans that end before this line are behind it
            span = next(read, None)
        if number in warned or (span is not None and span[0] <= number):
            continue
        why = (
            "a ``` fence's parameters cannot hold a backtick (CommonMark): write the value without it, or open"
            " the block with ~~~"
            if "`" in found.group(2) and found.group(1).startswith("`")
            else "it opens no code block where it stands (inside HTML, or after text that it continues)"
        )
        problems.append(Problem(file, number, f"this line looks like a labelled fence but is not one: {why}"))
    return problems


def parse_guide(text: str, file: str) -> ParsedGuide:
    """Parse guide text into labelled blocks in document order (pure: no I/O)."""
    collector = _Collector(file)
    tokens = _markdown().parse(text)
    front_matter: str | None = None
    front_matter_line = 0
    if tokens and tokens[0].type == "front_matter":
        front_matter = tokens[0].content
        front_matter_line = tokens[0].map[0] + 1 if tokens[0].map else 1
    elif _OPENS_FRONT_MATTER.match(text):
        collector.problems.append(
            Problem(
                file, 1, "front matter is never closed: its settings would be read as text; end it with a '---' line"
            )
        )
    collector.walk(tokens, text, 0, hidden=False)
    collector.problems.extend(_false_fences(text, file, collector))
    return ParsedGuide(
        file=file,
        blocks=tuple(collector.blocks),
        front_matter=front_matter,
        front_matter_line=front_matter_line,
        problems=tuple(collector.problems),
        warnings=tuple(collector.warnings),
        near_labels=tuple(collector.near_labels),
    )
