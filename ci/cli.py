"""What every command of the harness shares: the name it was started by, `--version`, exit codes, `[ERROR]` lines."""

from __future__ import annotations

import argparse
import contextlib
import enum
import errno
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TextIO

from ci import __version__
from ci.core.disk import os_error_text
from ci.core.text import escape_undecodable

__all__ = [
    "CONSOLE_SCRIPT_PREFIX",
    "ConsoleGuard",
    "ExitCode",
    "command_parser",
    "fail",
    "guarded_command",
    "guarded_console",
    "print_error",
    "program_name",
]

# The installed console scripts: guide-guard, guide-guard-rehearse, guide-guard-monitor, guide-guard-drift,
# guide-guard-pre-commit.
CONSOLE_SCRIPT_PREFIX = "guide-guard"


def program_name(module: str) -> str:
    """The command as the user typed it: the console script's name, else `python -m MODULE`.

    Under `python -m`, argv[0] is the module's file path, which no user typed; any other program
    name (a test runner calling main() in its own process) is not ours to show either.
    """
    started_as = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if started_as.startswith(CONSOLE_SCRIPT_PREFIX) and not started_as.endswith(".py"):
        return started_as
    return f"python -m {module}"


def command_parser(module: str, **options: Any) -> argparse.ArgumentParser:
    """An ArgumentParser for MODULE's command line, named as it was started, with `--version`."""
    parser = argparse.ArgumentParser(prog=program_name(module), **options)
    parser.add_argument(
        "--version", action="version", version=f"guide-guard {__version__}", help="print the version and exit"
    )
    return parser


class ExitCode(enum.IntEnum):
    """The exit statuses every command shares (a signal ends a run with 128 + its number instead)."""

    OK = 0  # everything asked for was done and passed
    FAILED = 1  # it ran, and something it checked did not hold (a block, a drift finding, an update left undone)
    USAGE = 2  # a usage or document error: nothing was run

    @staticmethod
    def interrupted(signum: int) -> int:
        """The status of a run stopped by a signal, as a shell reports it: 130 SIGINT, 143 SIGTERM, 129 SIGHUP."""
        return 128 + signum


def print_error(message: str, stream: TextIO | None = None) -> None:
    """The one way a command says what went wrong: an `[ERROR]` line, flushed at once.

    On stderr, unless STREAM is given: a line that belongs with a report on stdout (the run's console) goes there.
    Under Actions it issues no workflow command that MESSAGE quotes (a path, a name a guide or a block chose).
    """
    from ci.report.github import command_safe, in_github_actions

    print(
        command_safe(f"[ERROR] {message}", in_github_actions()),
        file=sys.stderr if stream is None else stream,
        flush=True,
    )


def fail(message: str, parser: argparse.ArgumentParser | None = None) -> ExitCode:
    """Fail a command on a usage or input error: its usage line (when given), the `[ERROR]` line, exit 2."""
    if parser is not None:
        parser.print_usage(sys.stderr)
    print_error(message)
    return ExitCode.USAGE


class ConsoleGuard:
    """What guarded_console yields: how a command whose output is meant for a pipe takes its reader closing."""

    def __init__(self) -> None:
        # True for a listing (`--list | head -1`): a reader that stops reading is normal, and not said
        self.closed_pipe_is_normal = False


@contextlib.contextmanager
def guarded_console() -> Iterator[ConsoleGuard]:
    """While it lasts, no write to stdout or stderr can stop the command or change its exit status.

    A stream that cannot be written any more (its reader closed the pipe:
    `| head -1`, a closed terminal; the disk of a log it was redirected to
    is full) is said once, as an `[ERROR]` on the other stream, and what
    follows for it is dropped; the command carries on and ends as it would
    have. A closed pipe is not said when the command set
    `closed_pipe_is_normal` on the guard it was given. A name holding bytes
    that are not UTF-8 is written with them as `\\xNN` (escape_undecodable),
    whatever the console's encoding.
    """
    streams = sys.stdout, sys.stderr
    guard = ConsoleGuard()
    out, err = _ConsoleStream(sys.stdout, "stdout", guard), _ConsoleStream(sys.stderr, "stderr", guard)
    out.other, err.other = err, out
    sys.stdout, sys.stderr = out, err
    try:
        yield guard
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = streams


class Main(Protocol):
    """A command's main(): its arguments (sys.argv's when None), its exit status."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def guarded_command(*, closed_pipe_is_normal: bool = False) -> Callable[[Main], Main]:
    """A command's main(), run inside guarded_console: its exit status is its own, whatever becomes of its console.

    `closed_pipe_is_normal`: its output is a report meant for a pipe as much
    as for a person (`| head`, `| jq`), so a reader that stops reading is not
    said.
    """

    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def guarded(argv: Sequence[str] | None = None) -> int:
            with guarded_console() as console:
                console.closed_pipe_is_normal = closed_pipe_is_normal
                return main(argv)

        return guarded

    return decorate


class _ConsoleStream:
    """A console stream that, once writing to it fails, says so on the other one and discards what follows.

    The descriptor is pointed at /dev/null then, so that nothing buffered
    fails again later (at exit, Python would turn that into exit status 120).
    """

    def __init__(self, stream: TextIO | None, name: str, guard: ConsoleGuard) -> None:
        self.stream = stream
        self.guard = guard  # whether a closed pipe is said
        self.name = name  # stdout or stderr, as the [ERROR] names it
        self.other: _ConsoleStream | None = None  # where its loss is said
        self.gone = stream is None  # Python leaves sys.stdout None when descriptor 1 was closed at start
        self.lock = threading.Lock()  # --stream writes from a second thread

    def write(self, text: str) -> int:
        if self.gone or self.stream is None:
            return len(text)
        try:
            try:
                self.stream.write(escape_undecodable(text))
            except UnicodeEncodeError:  # a console that is not UTF-8 (LANG=C on an old Python, a latin-1 locale)
                encoding = self.stream.encoding or "ascii"
                self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except OSError as exc:
            self._lost(exc)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.gone or self.stream is None:
            return
        try:
            self.stream.flush()
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        with self.lock:
            if self.gone:
                return
            self.gone = True
            target = self._target()
            try:
                descriptor = self.stream.fileno() if self.stream is not None else -1
            except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing to keep from failing
                descriptor = -1
            if descriptor >= 0:
                null = os.open(os.devnull, os.O_WRONLY)
                with contextlib.suppress(OSError):
                    os.dup2(null, descriptor)
                os.close(null)
        if exc.errno == errno.EPIPE and self.guard.closed_pipe_is_normal:
            return
        if self.other is not None:
            if exc.errno == errno.EPIPE:
                why = "its reader closed it (Broken pipe)"
            else:
                why = os_error_text(exc, target) if target else exc.strerror or str(exc)
            self.other.write(
                f"[ERROR] {self.name} cannot be written any more: {why}; what follows for it is dropped,"
                " and the command carries on to its end\n"
            )
            self.other.flush()

    def _target(self) -> str | None:
        """The file the stream writes to (`/var/log/run.log`), or None for a pipe, a socket or none at all."""
        try:
            target = os.readlink(f"/proc/self/fd/{self.stream.fileno() if self.stream is not None else -1}")
        except (OSError, ValueError):
            return None
        return target if target.startswith("/") else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
