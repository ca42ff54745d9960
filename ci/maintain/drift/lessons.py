"""Check 2, the lessons of real nights: five rules on what bash would run in a shell block, each learned from an
incident on a real Ascend runner (docs/monitor-and-drift.md names each rule's incident), each a warning.

The block is parsed with tree-sitter's bash grammar, so a rule sees commands, their words with the quotes taken
off, pipelines, lists, loops, functions, redirections and `&` as bash would, never text in a comment, a string or
a here-document. A block bash cannot parse gets no lesson: `bash -n` already says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import cache

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


def _text(node: Node) -> str:
    """A word as bash passes it on, quotes taken off (an expansion stays as written)."""
    raw = _source(node)
    if node.type == "raw_string":
        return raw[1:-1]
    if node.type in ("string", "concatenation"):
        return "".join(_text(child) for child in node.children if child.type != '"')
    return raw


@frozen
class _Command:
    """A simple command of the block, with what its wrappers say about it."""

    node: Node
    words: tuple[str, ...]  # the program and its arguments, wrappers (sudo, env, nohup, timeout ...) left out
    timed: bool  # run under `timeout`
    assigned: frozenset[str]  # NAME=value given to this command alone

    @property
    def line(self) -> int:
        return self.node.start_point.row + 1

    @property
    def program(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""


_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=.*", re.S)
# wrappers that run the rest of their words as the command, with their options that take a value
_WRAPPERS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-U"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "nohup": set(),
    "nice": {"-n", "--adjustment"},
    "time": set(),
    "exec": set(),
    "command": set(),
    "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-t"},
    "timeout": {"-k", "-s", "--kill-after", "--signal"},
}


def _command(node: Node) -> _Command:
    """The `command` NODE with its wrappers taken off."""
    words: list[str] = []
    assigned: set[str] = set()
    for index, child in enumerate(node.children):
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            assigned.add(_text(name) if name is not None else "")
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
    return _Command(node, tuple(words[index:]), timed, frozenset(assigned))


def _commands(root: Node) -> list[_Command]:
    return [_command(node) for node in _walk(root) if node.type == "command"]


def _assigned_in_block(root: Node, commands: Sequence[_Command]) -> set[str]:
    """Every variable the block sets (NAME=value, export, declare), and those each command is given."""
    names = {_text(name) for node in _walk(root) if node.type == "variable_assignment" for name in [node.children[0]]}
    for command in commands:
        names |= command.assigned
    return names


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
_BLOCK_BOUNDS = {"git": ("GIT_HTTP_LOW_SPEED_TIME",)}  # the variables that, set in the block, bound a tool's stalls
_HINTS = {
    "git": "or give git `-c http.lowSpeedLimit=1000 -c http.lowSpeedTime=60`",
    "curl": "or give curl `--max-time SECONDS` or `--speed-limit 1024 --speed-time 60`",
}
_GIT_NETWORK = {"clone", "fetch", "pull", "ls-remote", "submodule", "lfs"}
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


def _after_options(words: Sequence[str], with_values: set[str]) -> list[str]:
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in with_values else 1
    return list(words[index:])


def _option(words: Sequence[str], *names: str) -> bool:
    """One of the options NAMES is among WORDS (`--name`, `--name=value`, `-n`, `-nVALUE`)."""
    for word in words:
        for name in names:
            if word == name or (name.startswith("--") and word.startswith(name + "=")):
                return True
            if len(name) == 2 and not name.startswith("--") and word.startswith(name) and not word.startswith("--"):
                return True
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


def _network(command: _Command) -> tuple[str, str] | None:
    """(what to call it, its tool for the hint) when COMMAND reaches the network with no stall bound of its own."""
    words, program = command.words, command.program
    if program == "git":
        rest = _after_options(words[1:], {"-C", "-c", "--git-dir", "--work-tree"})
        if not rest or rest[0] not in _GIT_NETWORK:
            return None
        if _option(words, "-c") and any("lowspeedtime" in word.lower() for word in words):
            return None
        if rest[0] == "clone":
            sources = _after_options(rest[1:], {"-b", "--branch", "--depth", "-o", "--origin", "-c", "--config"})
            if sources and "://" not in sources[0] and not re.match(r"[\w.-]+@[\w.-]+:", sources[0]):
                return None  # a local repository
        if rest[0] == "submodule" and "update" not in rest:
            return None
        return f"git {rest[0]}", "git"
    if program == "curl":
        urls = [word for word in words[1:] if _URL.match(word)]
        if not urls or all(_LOCAL_HOST.match(url.split("://", 1)[1]) for url in urls):
            return None  # no address it names, or only this machine
        return None if _option(words, "-m", "--max-time", "-y", "--speed-time") else ("curl", "curl")
    return None


def _unbounded_network(block: ShellBlock, commands: Sequence[_Command], assigned: set[str]) -> list[Finding]:
    findings = []
    git_configured = any(
        command.program == "git"
        and "config" in command.words
        and any("lowspeedtime" in w.lower() for w in command.words)
        for command in commands
    )
    for command in commands:
        found = _network(command)
        if found is None or command.timed:
            continue
        what, tool = found
        if any(name in assigned for name in _BLOCK_BOUNDS.get(tool, ())) or (tool == "git" and git_configured):
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
        # uv writes its progress to stderr; `-q` keeps pip, apt and conda quiet on stdout
        if installs and (command.program == "uv" or any(re.fullmatch(r"-q+|--quiet", w) for w in command.words)):
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
    r"\bkill\s+-(?:0|s\s+0|n\s+0)\b|\bps\s+(?:-\w*p\b|--pid\b)|/proc/\$|\bjobs\b|\bwait\s+-n\b|\bpgrep\b|\bpidof\b"
)


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
                bodies[_text(name)] = _source(node)
    return bodies


def _loop_text(loop: Node, functions: dict[str, str]) -> str:
    """The loop's text, with the bodies of the block's functions it calls."""
    text = _source(loop)
    called = {_command(node).program for node in _walk(loop) if node.type == "command"}
    return text + "\n".join(body for name, body in functions.items() if name in called)


def _pid_variable(root: Node, server: Node) -> str | None:
    """The variable the block saves the pid of SERVER in (`PID=$!` after it), if any."""
    for node in _walk(root):
        if node.type == "variable_assignment" and node.start_byte > server.end_byte:
            value = node.child_by_field_name("value")
            if value is not None and _text(value) == "$!":
                name = node.child_by_field_name("name")
                return _text(name) if name is not None else None
    return None


def _unwatched_server(block: ShellBlock, root: Node) -> list[Finding]:
    findings = []
    functions = _functions(root)
    started = _backgrounded(root)
    for server in started:
        loops = [
            node
            for node in _walk(root)
            if node.type in _LOOPS and node.start_byte > server.end_byte and "sleep" in _loop_text(node, functions)
        ]
        if not loops or any(_ALIVE.search(_loop_text(loop, functions)) for loop in loops):
            continue
        name = next((_shown(_command(n)) for n in _walk(server) if n.type == "command"), "the server")
        pid = _pid_variable(root, server)
        saved = "" if pid else " save its pid (`PID=$!`) and"
        findings.append(
            _finding(
                block,
                loops[0].start_point.row + 1,
                f"this loop waits for `{name}`, started with `&` at line {block.fence_line + server.start_point.row + 1}, "
                "but never checks that it is still alive: a server that dies while starting costs the whole wait "
                f"(SGLang dying while starting, with the health check polled to its limit);{saved} fail at once in "
                f'the loop with `kill -0 "${pid or "PID"}" || {{ tail -50 LOG >&2; exit 1; }}`',
            )
        )
    return findings


# ---- rule 5: an install in a #test whose failure would show as a mismatch (run 33467285504) ----


def _errexit_before(root: Node, line: int, *, piped: bool) -> bool:
    """`set -e` (or `set -o errexit`) runs at the top of the block before LINE; for a command PIPED into another,
    `set -o pipefail` too, without which the pipeline's status is its last command's."""
    errexit = pipefail = False
    for node in root.children:
        if node.start_point.row + 1 >= line:
            break
        words = _command(node).words if node.type == "command" else ()
        if words[:1] == ("set",):
            flags = "".join(w for w in words[1:] if w.startswith("-") and not w.startswith("--"))
            errexit = errexit or "e" in flags or "errexit" in words
            pipefail = pipefail or "pipefail" in words
    return errexit and (pipefail or not piped)


def _field(parent: Node, child: Node) -> str | None:
    """The field of PARENT that CHILD stands in (`condition`, `body`), if any."""
    index = next(index for index, each in enumerate(parent.children) if each.id == child.id)
    return parent.field_name_for_child(index)


def _failure_seen(node: Node, root: Node) -> bool:
    """The install's failure stops the block or is acted on: in a condition, before `|| exit`, or the block's
    last statement."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("if_statement", "while_statement", "elif_clause") and _field(parent, child) == "condition":
            return True
        if parent.type == "negated_command":
            return True
        if parent.type == "list":
            operator = next((each.type for each in parent.children if each.type in ("&&", "||")), "")
            right = parent.children[-1]
            if operator == "||" and child.id != right.id and re.search(r"\b(?:exit|return)\b", _source(right)):
                return True
            if operator == "&&" and child.id != right.id:
                return _failure_seen(parent, root)
        if parent.type == "pipeline":
            return False  # its status is lost unless it is last, and then set -o pipefail is needed too
        if parent.id == root.id:
            return child.id == root.named_children[-1].id
        child, parent = parent, parent.parent
    return False


def _unchecked_install(block: ShellBlock, commands: Sequence[_Command], root: Node) -> list[Finding]:
    findings = []
    for command in commands:
        if not _installs(command):
            continue
        goes = _stdout_goes(command.node)
        if goes == "captured" or _errexit_before(root, command.line, piped=goes == "piped"):
            continue
        if _failure_seen(command.node, root):
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


def lesson_findings(block: ShellBlock) -> list[Finding]:
    """The warnings of the five rules on BLOCK, in the order of its lines."""
    root = _parser().parse(block.script.encode("utf-8")).root_node
    if root.has_error:
        return []
    commands = _commands(root)
    findings = _unbounded_network(block, commands, _assigned_in_block(root, commands))
    findings += _sourced_set_env(block, commands)
    if block.stores:
        findings += _noisy_store(block, commands, root)
    findings += _unwatched_server(block, root)
    if block.output_checked:
        findings += _unchecked_install(block, commands, root)
    return sorted(findings, key=lambda finding: finding.line)
