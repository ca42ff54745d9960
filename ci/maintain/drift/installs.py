"""Install commands in shell text: the words of a pip, uv or pipx install, which may pin packages (pure).

The text is cut into simple commands the way a shell reads it, closely enough
for this purpose: quotes taken off, `\\` line continuations joined, comments and
here-document bodies skipped, a command ending at `;`, `&&`, `||`, `|`, `&`, a
parenthesis, a brace, a backtick or a line end (so Markdown prose with inline
code works too: a quote left open, an apostrophe, ends at the line's end or at a backtick). A command installs when
its program, whatever path or quotes name it, is pip (`pip`, `pip3.11`,
`"$VENV/bin/pip"`, `python -m pip`, `"$(command -v python)" -m pip`,
`uv pip`, a variable naming one: `$PIP`, `"${VENV_PIP}"`, `$PYTHON -m pip`)
with the subcommand `install`, or `uv add`, `uv tool install`, `pipx install`
or `pipx inject`, after any general options and wrappers (`sudo`, `env`,
`NAME=value`, a `$ ` prompt). A command that runs a tool in a throwaway
environment (`uvx`, `uv tool run`, `uv run`) installs what its `--with` and
`--from` name, and `uvx`/`uv tool run` its tool (`uvx ruff@0.5.0`).
"""

from __future__ import annotations

import re

from ci.base import frozen

__all__ = ["ShellWord", "install_arguments"]


@frozen
class ShellWord:
    """One word of a command, as the shell passes it on."""

    text: str  # quotes taken off, a backslash-escaped character kept as that character
    line: int  # 1-based line of the text where the word starts


_TOKEN = re.compile(
    r"""(?P<continuation>\\\n)
    |(?P<blank>[ \t\r]+)
    |(?P<comment>\#[^\n]*)
    |(?P<redirect>\d*(?:<<<|<<-?|>>|&>>?|[<>]&?|>\|)(?:[-\d]+(?![^\s;&|()<>`]))?)
    |(?P<word>(?:"(?:[^"\\\n`]|\\.)*"?|'[^'\n`]*'?|\$\([^()\n]*\)|\\.|[^\s"'\\;&|()<>`{}])+)
    |(?P<separator>\n|&&|\|\||[;&|()`{}])
    |(?P<other>[\s\S])""",
    re.VERBOSE,
)
_QUOTING = re.compile(r"""\\(.)|"((?:[^"\\]|\\.)*)"?|'([^']*)'?""")
_HEREDOC_START = re.compile(r"\d*<<-?")
_TARGETLESS = re.compile(r"&[-\d]+\Z")

# words before the program that leave it the program: a prompt, a list marker, wrappers, shell keywords
_LEADING = re.compile(r"[-*+>$!]|\d+[.)]|sudo|env|time|nohup|exec|command|nice|then|do|else|if|elif|while|until|RUN")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_LOOKED_UP = re.compile(r"\$\((?:command\s+-v|which|type\s+-P)\s+([^\s()]+)\s*\)")  # "$(command -v python)"
_PIP = re.compile(r"pip(?:\d+(?:\.\d+)*)?")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")  # `$PIP`, `${VENV_PIP}`: the program a variable holds
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?|py")
# options that take the next word as their value when not written --option=value: of a wrapper (sudo -u USER),
# of the interpreter (python -X dev), and of pip, uv and pipx (general options and install options)
_WRAPPER_OPTIONS = frozenset({"-u", "-g", "-C", "-D", "-n", "-S", "-P"})
_PYTHON_OPTIONS = frozenset({"-X", "-W"})
_INSTALL_OPTION_WORDS = """-r --requirement -c --constraint -e --editable -i --index-url --extra-index-url -f --find-links -t
    --target --prefix --root --src --upgrade-strategy --platform --python-version --implementation --abi
    --progress-bar --config-settings -C --no-binary --only-binary --report --python -p --log --proxy
    --retries --timeout --exists-action --trusted-host --cert --client-cert --cache-dir --keyring-provider
    --use-feature --use-deprecated --directory --project --config-file --color --allow-insecure-host --index
    --default-index --index-strategy --torch-backend --extra --group --optional --with --pip-args --suffix"""
_INSTALL_OPTIONS = frozenset(_INSTALL_OPTION_WORDS.split())


def _unquoted(word: str) -> str:
    """WORD as the shell passes it on: quotes taken off (a quote left open ends with the word)."""

    def part(found: re.Match[str]) -> str:
        if found.group(1) is not None:
            return found.group(1)
        if found.group(2) is not None:
            return re.sub(r"\\([\\\"$`])", r"\1", found.group(2))
        return found.group(3)

    return _QUOTING.sub(part, word)


def _commands(text: str) -> list[list[ShellWord]]:
    """TEXT cut into simple commands, each a list of its words; redirections and here-document bodies left out."""
    commands: list[list[ShellWord]] = [[]]
    heredocs: list[str] = []  # delimiters of the here-documents whose bodies start at the next line
    position, line = 0, 1
    redirected = False  # the last token was a redirection: the next word is its target
    while position < len(text):
        token = _TOKEN.match(text, position)
        assert token is not None, "the last alternative matches any character"
        kind, value = token.lastgroup, token.group()
        position = token.end()
        if kind == "word":
            if redirected and heredocs and heredocs[-1] == "":
                heredocs[-1] = _unquoted(value)
            elif not redirected:
                commands[-1].append(ShellWord(_unquoted(value), line))
            redirected = False
        elif kind == "redirect":
            redirected = _TARGETLESS.search(value) is None  # `2>&1` names its target; `>`, `>>`, `<<` take a word
            if _HEREDOC_START.fullmatch(value):
                heredocs.append("")
        elif kind == "separator":
            redirected = False
            if commands[-1]:
                commands.append([])
            if value == "\n":
                line += 1
                for delimiter in heredocs:  # the bodies follow one another, each up to its delimiter's line
                    position, line = _after_heredoc(text, position, line, delimiter)
                heredocs = []
        line += value.count("\n") if kind != "separator" else 0
    return [command for command in commands if command]


def _after_heredoc(text: str, position: int, line: int, delimiter: str) -> tuple[int, int]:
    """Where the text goes on after a here-document body starting at POSITION (on LINE), and that line."""
    while position < len(text):
        end = text.find("\n", position)
        end = len(text) if end < 0 else end
        body_line = text[position:end]
        position, line = end + 1, line + 1
        if body_line.strip() == delimiter:
            break
    return min(position, len(text)), line


def _after_options(
    words: list[ShellWord], value_options: frozenset[str] = _INSTALL_OPTIONS, *, last: str = ""
) -> list[ShellWord]:
    """WORDS from the first that is not an option or an option's value, or from the option LAST (`-m`)."""
    index = 0
    while index < len(words) and words[index].text.startswith("-") and words[index].text != last:
        index += 2 if words[index].text in value_options else 1
    return words[index:]


def _operands(words: list[ShellWord]) -> list[ShellWord]:
    """The words that are neither options nor options' values: the packages of an install, requirements aside."""
    operands = []
    while words:
        words = _after_options(words)
        operands += words[:1]
        words = words[1:]
    return operands


def _program(word: str) -> str:
    """The program a command word names: its last path part, `python` for `$(command -v python)`, `pip` for a
    variable named for it (`$PIP`, `${VENV_PIP}`), `python` for one named for that (`$PYTHON`)."""
    looked_up = _LOOKED_UP.fullmatch(word)
    program = (looked_up.group(1) if looked_up else word).rsplit("/", 1)[-1]
    variable = _VARIABLE.fullmatch(program)
    if variable is not None:
        named = variable.group(1).lower().rsplit("_", 1)[-1]
        return named if _PIP.fullmatch(named) or _PYTHON.fullmatch(named) else program
    return program


def _tool_run(rest: list[ShellWord], *, tool_named: bool) -> list[ShellWord]:
    """What a throwaway environment gets installed (`uvx`, `uv tool run`: TOOL_NAMED; `uv run`): the values of
    --with and --from, and the tool itself."""
    installed = []
    index = 0
    while index < len(rest) and rest[index].text.startswith("-"):
        text = rest[index].text
        option, equals, value = text.partition("=")
        if option in ("--with", "--from") and equals:
            installed.append(ShellWord(value, rest[index].line))
        elif option in ("--with", "--from") and index + 1 < len(rest):
            installed.append(rest[index + 1])
        index += 2 if text in _INSTALL_OPTIONS or text == "--from" else 1
    if tool_named and index < len(rest) and not any(word.text.startswith("--from") for word in rest[:index]):
        installed.append(rest[index])
    return [word for part in installed for word in _split_list(part)]


def _split_list(word: ShellWord) -> list[ShellWord]:
    """`--with a==1,b==2`: each requirement of a comma-separated list."""
    return [ShellWord(text, word.line) for text in word.text.split(",") if text]


def _installed(command: list[ShellWord]) -> list[ShellWord]:
    """The words after the install subcommand when COMMAND installs packages, else none."""
    start = 0
    while start < len(command) and (
        _LEADING.fullmatch(command[start].text) or _ASSIGNMENT.fullmatch(command[start].text)
    ):
        start += 1
        start = len(command) - len(_after_options(command[start:], _WRAPPER_OPTIONS))  # sudo -H, env -i
    if start >= len(command):
        return []
    program, rest = _program(command[start].text), command[start + 1 :]
    if _PYTHON.fullmatch(program):
        rest = _after_options(rest, _PYTHON_OPTIONS, last="-m")
        if [word.text for word in rest[:2]] == ["-m", "pip"]:
            program, rest = "pip", rest[2:]
    if program == "uvx":
        return _tool_run(rest, tool_named=True)
    if program == "uv":
        rest = _after_options(rest)
        subcommand = [word.text for word in rest[:2]]
        if subcommand[:1] == ["add"]:
            return rest[1:]
        if subcommand == ["tool", "install"]:
            return rest[2:]
        if subcommand == ["tool", "run"]:
            return _tool_run(rest[2:], tool_named=True)
        if subcommand[:1] == ["run"]:
            return _tool_run(rest[1:], tool_named=False)
        if subcommand[:1] == ["pip"]:
            program, rest = "pip", rest[1:]
    if program == "pipx":
        rest = _after_options(rest)
        return rest[1:] if rest[:1] and rest[0].text in ("install", "inject") else []
    if _PIP.fullmatch(program):
        rest = _after_options(rest)
        return rest[1:] if rest[:1] and rest[0].text == "install" else []
    return []


def install_arguments(text: str) -> list[ShellWord]:
    """The operands of each pip, uv or pipx install command in TEXT, in order: options and their values left out."""
    return [word for command in _commands(text) for word in _operands(_installed(command))]
