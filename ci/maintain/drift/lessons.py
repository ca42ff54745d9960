"""Check 2, the lessons of real nights: five rules on what bash would run in a shell block, each learned from an
incident on a real Ascend runner (docs/monitor-and-drift.md names each rule's incident), each a warning.

The block is parsed with tree-sitter's bash grammar, so a rule sees commands, their words with the quotes taken
off, pipelines, lists, loops, functions, redirections and `&` as bash would, never text in a comment, a string or
a here-document. A block bash cannot parse gets no lesson: `bash -n` already says why. The blocks are read in
the order they run, each with what the guide gives every block (its ci.env) and what the earlier ones left
(git's global configuration, a server running in the background).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from functools import cache
from itertools import pairwise

import tree_sitter
import tree_sitter_bash

from ci.base import frozen
from ci.maintain.drift.findings import STATIC, Finding, Severity

__all__ = ["ShellBlock", "lesson_findings"]


@frozen
class ShellBlock:
    """A shell block as the lessons read it."""

    script: str  # the body as bash would run it: line N of the body is line N here, loaded values stand in
    file: str  # the guide as named
    fence_line: int  # the guide line of the opening fence: the body's line N is the guide's fence_line + N
    what: str  # how findings name the block: "#test id=X", "shell fence at line 12"
    output_checked: bool  # its stdout is compared with an expected output (a `#test`)
    stores: bool  # its stdout is stored as a value (a `#test-setup` with store=)


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


Node = tree_sitter.Node


def _walk(node: Node) -> Iterator[Node]:
    """NODE and every node below it, in document order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _source(node: Node) -> str:
    """NODE's text as written."""
    return (node.text or b"").decode("utf-8", errors="replace")


def _code(node: Node) -> str:
    """NODE's text as written, its comments left out."""
    text = node.text or b""
    for comment in sorted((each for each in _walk(node) if each.type == "comment"), key=lambda c: -c.start_byte):
        text = text[: comment.start_byte - node.start_byte] + text[comment.end_byte - node.start_byte :]
    return text.decode("utf-8", errors="replace")


def _text(node: Node) -> str:
    """A word as bash passes it on, quotes taken off (an expansion stays as written)."""
    raw = _source(node)
    if node.type == "raw_string":
        return raw[1:-1]
    if node.type in ("string", "concatenation", "command_name"):
        return "".join(_text(child) for child in node.children if child.type != '"')
    return raw


@frozen
class _Command:
    """A simple command of the block, with what its wrappers say about it."""

    node: Node
    words: tuple[str, ...]  # the program and its arguments, wrappers (sudo, env, nohup, timeout ...) left out
    timed: bool  # run under `timeout`
    assigned: frozenset[str]  # NAME=value given to this command alone
    row: int  # the 0-based row of the block it starts on

    @property
    def line(self) -> int:
        return self.row + 1

    @property
    def program(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""


_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=.*", re.S)
# wrappers that run the rest of their words as the command, with their options that take a value
_WRAPPERS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-U"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "nohup": set(),
    "setsid": set(),
    "nice": {"-n", "--adjustment"},
    "time": set(),
    "exec": set(),
    "command": set(),
    "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-t"},
    "timeout": {"-k", "-s", "--kill-after", "--signal"},
}


def _ends_a_statement(gap: bytes) -> bool:
    """The text between two words holds a newline that no backslash continues: bash ends the statement there."""
    return bool(re.search(rb"(?<!\\)\n", gap))


def _command(node: Node) -> _Command:
    """The `command` NODE with its wrappers taken off.

    tree-sitter-bash (0.25) reads two assignments or more on a line of their own (`A=1 B=2`) as the prefix of
    the next line's command; bash runs them as a statement of their own, so they are no part of it here either."""
    words: list[str] = []
    assigned: set[str] = set()
    row = node.start_point.row
    source = node.text or b""
    for index, child in enumerate(node.children):
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            assigned.add(_text(name) if name is not None else "")
            after = node.children[index + 1] if index + 1 < len(node.children) else None
            if after is not None and _ends_a_statement(
                source[child.end_byte - node.start_byte : after.start_byte - node.start_byte]
            ):
                assigned.clear()
                row = after.start_point.row
        elif child.type == "command_name" or node.field_name_for_child(index) == "argument":
            words.append(_text(child))
    timed = False
    index = 0
    while index < len(words):
        word = words[index]
        named = _ASSIGNMENT.fullmatch(word)
        program = word.rsplit("/", 1)[-1]
        if named and index > 0:  # `env NAME=value`
            assigned.add(named.group(1))
            index += 1
        elif program in _WRAPPERS:
            timed = timed or program == "timeout"
            index += 1
            while index < len(words) and words[index].startswith("-"):
                index += 2 if words[index] in _WRAPPERS[program] else 1
            if program == "timeout":
                index += 1  # the duration
        else:
            break
    return _Command(node, tuple(words[index:]), timed, frozenset(assigned), row)


def _commands(root: Node) -> list[_Command]:
    return [_command(node) for node in _walk(root) if node.type == "command"]


def _shown(command: _Command) -> str:
    """How a finding names a command: its program and its words up to the first option or operand that is not a
    subcommand (`uv pip install`, `python -m sglang.launch_server`, `apt-get install`)."""
    shown = [command.program]
    for word in command.words[1:4]:
        if not re.fullmatch(r"-m|[a-z][a-z0-9_.-]*", word) or shown[-1] in ("install", "download", "add", "sync"):
            break
        shown.append(word)
    return " ".join(shown)


def _finding(block: ShellBlock, line: int, message: str) -> Finding:
    return Finding(STATIC, Severity.WARNING, block.file, block.fence_line + line, f"{block.what}: {message}")


# ---- rule 1: a network command with no time or stall bound (run 33254357756) ----

_LOCAL_HOST = re.compile(r"(?:[a-z]+://)?(?:localhost|127(?:\.\d+){3}|0\.0\.0\.0|\[::1\])(?:[:/]|$)", re.I)
_URL = re.compile(r"(?:https?|ftp)://", re.I)
# Only the tools that wait for ever on a silent connection by default: pip (its --timeout, 15 s a read), uv
# (UV_HTTP_TIMEOUT, 30 s) and the Hub's client (HF_HUB_DOWNLOAD_TIMEOUT, 10 s) give up on their own, and wget
# after 900 s; git and curl wait until the block's limit.
# git bounds a stall only when both settings are above 0 (its http.c sets curl's low-speed limit only then), from
# `-c`, `git config` or the environment variables standing for them
_GIT_STALL_SETTINGS = frozenset({"http.lowspeedlimit", "http.lowspeedtime"})
_GIT_STALL_VARIABLES = {
    "GIT_HTTP_LOW_SPEED_LIMIT": "http.lowspeedlimit",
    "GIT_HTTP_LOW_SPEED_TIME": "http.lowspeedtime",
}
_HINTS = {
    "git": "or give git `-c http.lowSpeedLimit=1000 -c http.lowSpeedTime=60` (or export both "
    "GIT_HTTP_LOW_SPEED_LIMIT and GIT_HTTP_LOW_SPEED_TIME, in the block or in the front matter's ci.env)",
    "curl": "or give curl `--max-time SECONDS` or `--speed-limit 1024 --speed-time 60`",
}
_GIT_NETWORK = {"clone", "fetch", "pull", "ls-remote", "submodule", "lfs"}
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


def _after_options(words: Sequence[str], with_values: set[str]) -> list[str]:
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in with_values else 1
    return list(words[index:])


# curl's short options that take a value: in a cluster of short options (`-fsSLm 60`) the rest of the word, or
# the next word, is that value
_CURL_VALUED = frozenset("bcCdeEFhHKmoPQrtTuUwxXyYz")


def _curl_option(words: Sequence[str], *names: str) -> bool:
    """One of curl's options NAMES is among WORDS (`--name`, `--name=value`, `-n`, `-nVALUE`, `-fsSLn VALUE`)."""
    for word in words:
        if word in names or any(name.startswith("--") and word.startswith(name + "=") for name in names):
            return True
        if re.fullmatch(r"-[^-].*", word):
            for letter in word[1:]:
                if "-" + letter in names:
                    return True
                if letter in _CURL_VALUED:
                    break
    return False


def _pip_words(command: _Command) -> tuple[str, list[str]] | None:
    """("pip"|"uv", the words after the program) when the command is pip, `python -m pip`, uv or pipx."""
    words = list(command.words)
    program = command.program
    if _PYTHON.fullmatch(program):
        rest = list(words[1:])
        while rest and rest[0].startswith("-") and rest[0] != "-m":  # the interpreter's options (-u, -X dev)
            rest = rest[2:] if rest[0] in ("-X", "-W") else rest[1:]
        if rest[:2] == ["-m", "pip"]:
            return "pip", rest[2:]
        return None
    if re.fullmatch(r"pip(?:\d+(?:\.\d+)*)?|pipx", program):
        return "pip", words[1:]
    if program == "uv":
        return "uv", words[1:]
    return None


def _network(command: _Command, values: dict[str, str]) -> tuple[str, str] | None:
    """(what to call it, its tool for the hint) when COMMAND reaches the network with no stall bound of its own;
    VALUES are the variables the block sets, for an address given as `"$URL"`."""
    words, program = command.words, command.program
    if program == "git":
        rest = _after_options(words[1:], {"-C", "-c", "--git-dir", "--work-tree"})
        if not rest or rest[0] not in _GIT_NETWORK:
            return None
        if rest[0] == "clone":
            sources = _after_options(rest[1:], {"-b", "--branch", "--depth", "-o", "--origin", "-c", "--config"})
            if sources and "://" not in sources[0] and not re.match(r"[\w.-]+@[\w.-]+:", sources[0]):
                return None  # a local repository
        if rest[0] == "submodule" and "update" not in rest:
            return None
        return f"git {rest[0]}", "git"
    if program == "curl":
        given = [values.get(re.sub(r"^\$\{?(\w+)\}?$", r"\1", word), word) for word in words[1:]]
        urls = [word for word in given if _URL.match(word)]
        if not urls or all(_LOCAL_HOST.match(url.split("://", 1)[1]) for url in urls):
            return None  # no address it names, or only this machine
        # --speed-limit alone stops a transfer slower than it for 30 s, --speed-time alone one slower than 1 byte/s
        bounded = _curl_option(words, "-m", "--max-time", "-y", "--speed-time", "-Y", "--speed-limit")
        return None if bounded else ("curl", "curl")
    return None


def _git_settings(command: _Command) -> set[str]:
    """The git settings COMMAND gives itself (`git -c NAME=VALUE`) or writes (`git config NAME VALUE`), in
    lowercase, and those its own environment variables stand for (`NAME=VALUE git ...`, `env NAME=VALUE git ...`)."""
    settings = {_GIT_STALL_VARIABLES[name] for name in command.assigned if name in _GIT_STALL_VARIABLES}
    if command.program != "git":
        return settings
    words = list(command.words[1:])
    for index, word in enumerate(words[:-1]):
        if word == "-c":
            settings.add(words[index + 1].split("=", 1)[0].lower())
    rest = _after_options(words, {"-C", "-c", "--git-dir", "--work-tree"})
    if rest[:1] == ["config"]:
        names = _after_options(rest[1:], {"-f", "--file", "--blob", "--type"})
        if len(names) > 1:  # a name and its value: a setting written, not read
            settings.add(names[0].lower())
    return settings


def _exported_before(root: Node, command: _Command) -> set[str]:
    """The variables `export` or `declare -x` hands to the commands the block runs after COMMAND starts (a
    variable only set, `NAME=value`, stays in the shell)."""
    names: set[str] = set()
    for node in _walk(root):
        if node.type != "declaration_command" or node.start_byte >= command.node.start_byte:
            continue
        words = [_source(child) for child in node.children]
        if words[0] == "export" or any(re.fullmatch(r"-[a-z]*x[a-z]*", word) for word in words[1:]):
            for child in node.children:
                name = child.child_by_field_name("name") if child.type == "variable_assignment" else child
                if name is not None and name.type == "variable_name":
                    names.add(_text(name))
    return names


def _configured_for_later_blocks(commands: Sequence[_Command]) -> set[str]:
    """The git settings the block writes into the user's or the system's configuration, which later blocks read."""
    return {
        setting
        for command in commands
        if command.program == "git" and ("--global" in command.words or "--system" in command.words)
        for setting in _git_settings(command)
    }


def _git_bounded(command: _Command, commands: Sequence[_Command], root: Node, guide_settings: set[str]) -> bool:
    """The git COMMAND has a stall bound: both low-speed settings, from GUIDE_SETTINGS (every block's), its own
    `-c` or environment, a `git config` or an `export` before it in the block."""
    settings = guide_settings | _git_settings(command)
    names = _exported_before(root, command)
    settings |= {_GIT_STALL_VARIABLES[name] for name in names if name in _GIT_STALL_VARIABLES}
    for earlier in commands:
        if earlier.node.start_byte < command.node.start_byte and "config" in earlier.words:
            settings |= _git_settings(earlier)
    return settings >= _GIT_STALL_SETTINGS


def _unbounded_network(
    block: ShellBlock, commands: Sequence[_Command], root: Node, guide_settings: set[str]
) -> list[Finding]:
    """The network commands of the block with no bound; GUIDE_SETTINGS are the git settings every block gets (the
    front matter's ci.env, `git config --global` in an earlier block)."""
    findings = []
    values = {}
    for node in _walk(root):
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        if node.type == "variable_assignment" and name is not None and value is not None:
            values[_text(name)] = _text(value)
    for command in commands:
        found = _network(command, values)
        if found is None or command.timed:
            continue
        what, tool = found
        if tool == "git" and _git_bounded(command, commands, root, guide_settings):
            continue
        hint = _HINTS[tool]
        findings.append(
            _finding(
                block,
                command.line,
                f"`{what}` has no time or stall bound: a connection that sends nothing holds it until the block's "
                f"limit (a stalled download burned a 90-minute limit in Actions run 33254357756, and a git clone hung "
                f"at TLS); run it as `timeout SECONDS {command.words[0]} ...` {hint}",
            )
        )
    return findings


# ---- rule 2: `source .../set_env.sh` (run 33464343161) ----


def _sourced_set_env(block: ShellBlock, commands: Sequence[_Command]) -> list[Finding]:
    return [
        _finding(
            block,
            command.line,
            f"`{command.words[0]} {command.words[1]}`: the CANN profile returns early in a non-interactive shell, "
            "and a block runs in one, so the variables it should set stay empty (ASCEND_HOME was empty in Actions "
            "run 33464343161); read what the block needs from the toolkit's files (the version from "
            "ascend_toolkit_install.info) or export those variables in the block",
        )
        for command in commands
        if command.program in ("source", ".") and len(command.words) > 1 and command.words[1].endswith("set_env.sh")
    ]


# ---- rule 3: a store block printing more than its value (run 33507844975) ----

# commands that print on stdout when they work: a store block's value is printed by one of them, and a second
# one's output would be stored with it (a command not named here is taken to print nothing there: git, sed -i,
# conda activate, mkdir; a false warning fails a commit)
_PRINTERS = frozenset(
    # a list of words reads better as words than as 30 quoted strings, one a line
    """echo printf cat ls pwd find head tail grep awk jq date env which realpath readlink basename dirname wc sort
    uniq cut tr du df nproc hostname id whoami uname npu-smi nvidia-smi python python3 huggingface-cli hf
    modelscope""".split()  # noqa: SIM905
)
_INSTALLERS = re.compile(r"apt-get|apt|yum|dnf|conda|mamba|npm|pip(?:\d+(?:\.\d+)*)?|pipx")
_CHATTY = frozenset({"pushd", "popd"})


def _installs(command: _Command) -> bool:
    """COMMAND installs packages: pip, uv, pipx, apt, conda or npm with its install subcommand."""
    pip = _pip_words(command)
    if pip is not None and _PYTHON.fullmatch(command.program):
        return _after_options(pip[1], set())[:1] == ["install"]
    installer = _INSTALLERS.fullmatch(command.program) or command.program == "uv"
    return bool(installer) and any(word in ("install", "add", "sync") for word in command.words[1:3])


def _stdout_goes(node: Node) -> str | None:
    """Where the stdout of NODE goes when something on the way up takes it: "captured", "piped", "away"; None when
    it reaches the block's stdout."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("command_substitution", "process_substitution"):
            return "captured"
        if parent.type == "pipeline" and child.id != parent.named_children[-1].id:
            return "piped"  # every part of a pipeline but the last writes into the next
        if parent.type == "redirected_statement":
            for redirect in parent.children:
                if redirect.type == "file_redirect" and _takes_stdout(redirect):
                    return "away"
        child, parent = parent, parent.parent
    return None


def _takes_stdout(redirect: Node) -> bool:
    """A redirection of stdout elsewhere: `>file`, `>/dev/null`, `>&2`, `1>...`, `&>...`."""
    text = _source(redirect).replace(" ", "")
    return bool(re.match(r"(?:1?>{1,2}\|?|&>{1,2}|1?>&)", text)) and not re.match(r"1?>&1\b", text)


def _noisy_store(block: ShellBlock, commands: Sequence[_Command], root: Node) -> list[Finding]:
    """A store block's writers to stdout beside its value: an installer or pushd anywhere, or more than one
    statement at the top of the block that writes to stdout."""
    findings = []
    writers: list[_Command] = []
    for command in commands:
        if not command.words or _stdout_goes(command.node) is not None:
            continue
        installs = _installs(command)
        # uv writes its progress to stderr; `-q` keeps pip and conda quiet on stdout, apt needs `-qq`
        quiet = r"-qq+|-q=2|--quiet=2" if command.program in ("apt", "apt-get") else r"-q+|--quiet"
        if installs and (command.program == "uv" or any(re.fullmatch(quiet, w) for w in command.words)):
            continue
        if installs or command.program in _CHATTY:
            findings.append(
                _finding(
                    block,
                    command.line,
                    f"`{_shown(command)}` writes to stdout, which this block stores beside its value "
                    "(a model path was stored with a download client's progress line, Actions run 33507844975); "
                    "send it to stderr with `>&2` (or to a log file), so that only the value is printed",
                )
            )
        elif (command.program in _PRINTERS or _PYTHON.fullmatch(command.program)) and _on_top(command.node, root):
            writers.append(command)
    if len(writers) > 1 and not findings:
        lines = ", ".join(f"`{w.program}` at line {block.fence_line + w.line}" for w in writers)
        findings.append(
            _finding(
                block,
                writers[0].line,
                f"this block stores its stdout, and {len(writers)} commands print to it ({lines}): the value "
                "stored would hold them all (a model path was stored with a download client's progress line, "
                "Actions run 33507844975); send all but the value to stderr with `>&2`",
            )
        )
    return findings


def _on_top(node: Node, root: Node) -> bool:
    """NODE runs at the top of the block, each time the block runs: not in a branch, a loop, a function or after
    `||`."""
    child, parent = node, node.parent
    while parent is not None and parent.id != root.id:
        if parent.type in (
            "if_statement",
            "elif_clause",
            "else_clause",
            "case_statement",
            "case_item",
            "while_statement",
            "for_statement",
            "c_style_for_statement",
            "function_definition",
            "negated_command",
        ):
            return False
        if parent.type == "list" and child.id == parent.children[-1].id and parent.children[-2].type == "||":
            return False
        child, parent = parent, parent.parent
    return True


# ---- rule 4: a background server whose readiness loop never checks it is alive (the dying SGLang) ----

_LOOPS = ("while_statement", "for_statement", "c_style_for_statement")
_ALIVE = re.compile(
    r"\bkill\s+-(?:0|s\s+0|n\s+0)\b|\bps\s+(?:-\w*p\b|--pid\b)|/proc/\W?\$|\bjobs\b|\bwait\s+-n\b|\bpgrep\b|\bpidof\b"
)


# the commands that set a server's start up, before it in the statement run with `&`
_NOT_THE_SERVER = frozenset({"cd", "pushd", "export", "source", ".", "ulimit", "umask"})


def _backgrounded(root: Node) -> list[Node]:
    """The statements run with `&`."""
    found = []
    for node in _walk(root):
        for index, child in enumerate(node.children[:-1]):
            if child.is_named and node.children[index + 1].type == "&":
                found.append(child)
    return found


def _functions(root: Node) -> dict[str, str]:
    bodies = {}
    for node in _walk(root):
        if node.type == "function_definition":
            name = node.child_by_field_name("name")
            if name is not None:
                bodies[_text(name)] = _code(node)
    return bodies


def _loop_text(loop: Node, functions: dict[str, str]) -> str:
    """The loop's code, with the bodies of the block's functions it calls."""
    called = {_command(node).program for node in _walk(loop) if node.type == "command"}
    return _code(loop) + "\n".join(body for name, body in functions.items() if name in called)


def _pid_variable(root: Node, server: Node) -> str | None:
    """The variable the block saves the pid of SERVER in (`PID=$!` after it), if any."""
    for node in _walk(root):
        if node.type == "variable_assignment" and node.start_byte > server.end_byte:
            value = node.child_by_field_name("value")
            if value is not None and _text(value) == "$!":
                name = node.child_by_field_name("name")
                return _text(name) if name is not None else None
    return None


@frozen
class _Loop:
    """A loop of the block that sleeps."""

    start_byte: int  # where it starts in the block; for a loop in a `bash -c` string, where that command starts
    row: int  # the 0-based row of the block it starts on
    text: str  # its code, with the bodies of the block's functions it calls


def _loops_in_strings(node: Node) -> list[_Loop]:
    """The loops that sleep in the script a `bash -c` or `sh -c` command NODE runs (`timeout 300 bash -c '...'`)."""
    command = _command(node)
    if command.program not in ("bash", "sh") or not any(re.fullmatch(r"-\w*c", w) for w in command.words[1:2]):
        return []
    arguments = [each for index, each in enumerate(node.children) if node.field_name_for_child(index) == "argument"]
    script = next((after for each, after in pairwise(arguments) if re.fullmatch(r"-\w*c", _text(each))), None)
    if script is None:
        return []
    inner = _parser().parse(_text(script).encode("utf-8")).root_node
    if inner.has_error:
        return []
    return [
        _Loop(node.start_byte, script.start_point.row + loop.start_point.row, _code(loop))
        for loop in _walk(inner)
        if loop.type in _LOOPS and "sleep" in _code(loop)
    ]


def _sleeping_loops(root: Node, after: int, functions: dict[str, str]) -> list[_Loop]:
    """The loops that sleep and run after byte AFTER of the block: written after it, in a function of the block
    called after it, or in the string of a `bash -c` after it; in the order of their lines."""
    called_after = {
        _command(node).program for node in _walk(root) if node.type == "command" and node.start_byte > after
    }
    loops = []
    for node in _walk(root):
        if node.type == "command" and node.start_byte > after:
            loops += _loops_in_strings(node)
        if node.type not in _LOOPS or "sleep" not in _loop_text(node, functions):
            continue
        function = node.parent
        while function is not None and function.type != "function_definition":
            function = function.parent
        name = function.child_by_field_name("name") if function is not None else None
        if node.start_byte > after or (name is not None and _text(name) in called_after):
            loops.append(_Loop(node.start_byte, node.start_point.row, _loop_text(node, functions)))
    return sorted(loops, key=lambda loop: (loop.row, loop.start_byte))


def _waited_for(root: Node, server: Node, pid: str | None) -> int | None:
    """The byte of the block where a `wait` for SERVER (with no operand, or its pid's variable) starts, if any."""
    for node in _walk(root):
        if node.type == "command" and node.start_byte > server.end_byte:
            words = _command(node).words
            if words[:1] == ("wait",) and (len(words) == 1 or (pid is not None and f"${pid}" in words[1:])):
                return node.start_byte
    return None


@frozen
class _Started:
    """A command an earlier block left running in the background, waited for by no loop of its own block."""

    line: int  # the guide line of its start
    name: str  # how findings name it: `python -m sglang.launch_server`


def _unwatched_server(
    block: ShellBlock, root: Node, running: Sequence[_Started]
) -> tuple[list[Finding], list[_Started]]:
    """The warnings on loops waiting for a server started with `&`, in this block or one RUNNING from an earlier
    block, that never check it is alive; and the servers still running for later blocks."""
    findings = []
    functions = _functions(root)
    left_running = []
    for server in _backgrounded(root):
        pid = _pid_variable(root, server)
        waited = _waited_for(root, server, pid)
        loops = [
            loop
            for loop in _sleeping_loops(root, server.end_byte, functions)
            if waited is None or loop.start_byte < waited
        ]
        name = next((_shown(each) for each in _commands(server) if each.program not in _NOT_THE_SERVER), "the server")
        line = block.fence_line + server.start_point.row + 1
        if not loops:
            if waited is None:
                left_running.append(_Started(line, name))
            continue
        if any(_ALIVE.search(loop.text) for loop in loops):
            continue
        saved = "" if pid else " save its pid (`PID=$!`) and"
        findings.append(
            _finding(
                block,
                loops[0].row + 1,
                f"this loop waits for `{name}`, started with `&` at line {line}, but never checks that it is still "
                "alive: a server that dies while starting costs the whole wait (SGLang dying while starting, with "
                f"the health check polled to its limit);{saved} fail at once in the loop with "
                f'`kill -0 "${pid or "PID"}" || {{ tail -50 LOG >&2; exit 1; }}`',
            )
        )
    loops = _sleeping_loops(root, -1, functions)
    if not loops:
        return findings, [*running, *left_running]
    # the first loop that sleeps after a server an earlier block started is the one that waits for it
    if not _ALIVE.search(loops[0].text):
        findings += [
            _finding(
                block,
                loops[0].row + 1,
                f"this loop waits for `{server.name}`, started with `&` at line {server.line} (another block), but "
                "never checks that it is still alive: a server that dies while starting costs the whole wait "
                "(SGLang dying while starting, with the health check polled to its limit); `$!` is gone in this "
                "block: write its pid to a file with `echo $! >/tmp/PID_FILE` after the start, and fail at once in "
                'the loop with `kill -0 "$(cat /tmp/PID_FILE)" || { tail -50 LOG >&2; exit 1; }`',
            )
            for server in running
        ]
    return findings, left_running


# ---- rule 5: an install in a #test whose failure would show as a mismatch (run 33467285504) ----


def _errexit_before(root: Node, command: _Command, *, piped: bool) -> bool:
    """`set -e` (or `set -o errexit`) is on at the top of the block when COMMAND starts (a `set +e` after it turns
    it off); for a command PIPED into another, `set -o pipefail` too, without which the pipeline's status is its
    last command's."""
    options = {"errexit": False, "pipefail": False}
    for node in root.children:
        if node.start_byte >= command.node.start_byte:
            break
        words = _command(node).words if node.type == "command" else ()
        if words[:1] == ("trap",) and "ERR" in words[2:] and re.search(r"\bexit\b", words[1]):
            options["errexit"] = True  # a failing command runs the trap, which ends the block as errexit would
        if words[:1] != ("set",):
            continue
        for index, word in enumerate(words[1:], start=1):
            if not re.fullmatch(r"[-+][a-zA-Z]+", word):
                continue
            on = word[0] == "-"
            if "e" in word:
                options["errexit"] = on
            if "o" in word and index + 1 < len(words) and words[index + 1] in options:
                options[words[index + 1]] = on
    return options["errexit"] and (options["pipefail"] or not piped)


def _field(parent: Node, child: Node) -> str | None:
    """The field of PARENT that CHILD stands in (`condition`, `body`), if any."""
    index = next(index for index, each in enumerate(parent.children) if each.id == child.id)
    return parent.field_name_for_child(index)


def _ends_the_block(node: Node, functions: dict[str, str]) -> bool:
    """NODE runs `exit` or `return`, itself or in a function of the block it calls (`|| die "no install"`)."""
    if re.search(r"\b(?:exit|return)\b", _source(node)):
        return True
    called = {_command(each).program for each in _walk(node) if each.type == "command"}
    return any(re.search(r"\bexit\b", body) for name, body in functions.items() if name in called)


def _failure_seen(node: Node, root: Node, functions: dict[str, str]) -> bool:
    """The install's failure stops the block or is acted on: in a condition, before `|| exit` (or a function of
    the block that exits), or the block's last statement."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("if_statement", "while_statement", "elif_clause") and _field(parent, child) == "condition":
            return True
        if parent.type == "negated_command":
            return True
        if parent.type == "list":
            operator = next((each.type for each in parent.children if each.type in ("&&", "||")), "")
            right = parent.children[-1]
            if operator == "||" and child.id != right.id and _ends_the_block(right, functions):
                return True
            if operator == "&&" and child.id != right.id:
                return _failure_seen(parent, root, functions)
        if parent.type == "pipeline":
            return False  # its status is lost unless it is last, and then set -o pipefail is needed too
        if parent.id == root.id:
            return child.id == root.named_children[-1].id
        child, parent = parent, parent.parent
    return False


def _unchecked_install(block: ShellBlock, commands: Sequence[_Command], root: Node) -> list[Finding]:
    findings = []
    functions = _functions(root)
    for command in commands:
        if not _installs(command):
            continue
        goes = _stdout_goes(command.node)
        if goes == "captured" or _errexit_before(root, command, piped=goes == "piped"):
            continue
        if _failure_seen(command.node, root, functions):
            continue
        findings.append(
            _finding(
                block,
                command.line,
                f"`{_shown(command)}` can fail and the block go on: its failure would show later, as a mismatch "
                "of the expected output or another command's error, not as the install that failed (Actions run "
                "33467285504 compared 60 lines of a script's output with 2 expected lines); start the block with "
                "`set -euo pipefail` or add `|| exit 1` after it",
            )
        )
    return findings


def lesson_findings(blocks: Sequence[ShellBlock], guide_env: Collection[str] = ()) -> list[Finding]:
    """The warnings of the five rules on a guide's shell BLOCKS, given in the order they run, in the order of their
    lines. GUIDE_ENV names the variables the guide gives every block (its front matter's ci.env).

    What a block leaves for the later ones counts there: the git configuration it writes with --global, a server
    it leaves running in the background."""
    findings: list[Finding] = []
    git_settings = {_GIT_STALL_VARIABLES[name] for name in guide_env if name in _GIT_STALL_VARIABLES}
    running: list[_Started] = []
    for block in blocks:
        root = _parser().parse(block.script.encode("utf-8")).root_node
        if root.has_error:
            continue
        commands = _commands(root)
        findings += _unbounded_network(block, commands, root, git_settings)
        git_settings |= _configured_for_later_blocks(commands)
        findings += _sourced_set_env(block, commands)
        if block.stores:
            findings += _noisy_store(block, commands, root)
        unwatched, running = _unwatched_server(block, root, running)
        findings += unwatched
        if block.output_checked:
            findings += _unchecked_install(block, commands, root)
    return sorted(findings, key=lambda finding: (finding.file, finding.line))
