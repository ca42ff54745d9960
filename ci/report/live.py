"""While a block runs: its output copied to the log as it grows (--stream), and a heartbeat when the log is silent."""

from __future__ import annotations

import codecs
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci.base.text import Masker, clean_text, clean_unmasked, human_size, partial_escape_start, plural, policy

__all__ = [
    "LAST_LINE_CHARS",
    "LIVE_LIMIT_BYTES",
    "MIN_HEARTBEAT_S",
    "STREAM_PREFIXES",
    "BlockWatch",
    "LiveWatcher",
    "heartbeat_line",
]

LIVE_LIMIT_BYTES = 8 * 1024 * 1024  # --stream shows this much of each stream of a block: a log is no place for GiBs
_READ_BYTES = 1 << 16  # one read of a followed file: memory stays bounded however fast a block writes
_POLL_S = 0.2  # how often --stream looks for more output
# what starts each line --stream shows, telling the streams apart; `output`: stdout and stderr merged in one file
STREAM_PREFIXES = {"stdout": "| ", "stderr": "! ", "output": "| "}
MIN_HEARTBEAT_S = 1.0  # --heartbeat's least T: a line per silent T, so a smaller one would flood the log
LAST_LINE_CHARS = 120  # a heartbeat quotes at most this much of the block's last line
_LAST_LINE_READ_BYTES = 4096  # the heartbeat reads this much of the end of a stream for its last line
_BARE_CARRIAGE_RETURN = re.compile(r"\r(?!\n)")  # a line redrawn in place (a progress bar), not a CRLF


def _elapsed(seconds: float) -> str:
    """`0.3s`, `42s`, `5m00s`, `2h05m`: a running block's age, as precise as a reader wants it."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _last_line(path: Path, masker: Masker) -> str | None:
    """The last non-blank line of a stream file, cleaned, masked and cut to LAST_LINE_CHARS; None for none.

    Only the file's end is read. When the line began before that, what is read
    first may be the end of a secret cut in two: it is dropped, and the cut moves
    past any secret it falls inside, so masking hides every secret shown whole.
    """
    around = masker.longest_bytes
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(size - _LAST_LINE_READ_BYTES - around, 0)
            handle.seek(start)
            raw = handle.read(size - start)
    except OSError:
        return None  # not created yet, or removed by the block
    text = clean_unmasked(raw.decode("utf-8", "replace"))
    if start > 0 and masker.secrets:
        # a secret begun before the read leaves at most its length (and 3 U+FFFD for a split character)
        text = text[masker.clear_cut(text, min(masker.longest_chars + 3, len(text)), forward=True) :]
    lines = masker.mask(text).rstrip().rsplit("\n", 1)
    last = lines[-1].strip()
    if not last:
        return None
    # cut after masking: the masked text holds no secret, so no cut can show part of one
    return last if len(last) <= LAST_LINE_CHARS else last[:LAST_LINE_CHARS] + " [...]"


def heartbeat_line(
    name: str, elapsed_s: float, paths: Mapping[str, Path], masker: Masker, ending: str | None = None
) -> str:
    """`... still running NAME: 5m00s, stdout 1.2 KiB, stderr 0 B, last line: TEXT` (the last line of the stream written
    last); `... ending NAME, ENDING: ...` once the harness is ending the block (ENDING: why, `timed out after 30m`)."""
    sizes = []
    newest: tuple[int, str] | None = None  # (modification time, last line) of the stream written last
    wrote = False
    for stream, path in paths.items():
        try:
            stat = os.stat(path)
        except OSError:
            sizes.append(f"{stream} 0 B")
            continue
        sizes.append(f"{stream} {human_size(stat.st_size)}")
        wrote = wrote or stat.st_size > 0
        if stat.st_size and (newest is None or stat.st_mtime_ns > newest[0]):
            line = _last_line(path, masker)
            if line is not None:
                newest = (stat.st_mtime_ns, line)
    last = newest[1] if newest is not None else "(blank)"  # (blank): only blank lines at the end of what was written
    said = f"last line: {last}" if wrote else "no output yet"
    doing = f"still running {name}" if ending is None else f"ending {name}, {ending}"
    return clean_text(f"... {doing}: {_elapsed(elapsed_s)}, {', '.join(sizes)}, {said}", masker)


@dataclass
class _Followed:
    """One output file of a running block, and what of it is read but not shown yet."""

    name: str  # stdout or stderr; output for a block whose streams are merged
    path: Path
    decoder: codecs.IncrementalDecoder  # keeps a character split between two reads whole
    read_bytes: int = 0  # how much of the file is read
    raw: str = ""  # decoded text that may be the start of an escape sequence or a CRLF: cleaned once complete
    held: str = ""  # cleaned text that may be the start of a secret whose rest is not written yet
    line_ended: bool = True  # whether its cleaned text so far ends a line (or there is none yet)
    stopped: bool = False  # its first LIVE_LIMIT_BYTES are read: the rest is left to the file


def _redraws_as_lines(stream: _Followed, raw: str) -> str:
    """RAW (what STREAM wrote next) cleaned for the log, each state of a line redrawn in place on a line of its own.

    A terminal shows a bare carriage return by writing the line again over
    itself; a log keeps each state, so the return ends the line it follows.
    One where a line starts already (a progress bar's `\\r` before each
    drawing, a redraw after a newline) ends nothing: it would show as an empty
    line the block never printed. CRLF ends one line, as a newline does.
    """
    pieces = []
    for index, part in enumerate(_BARE_CARRIAGE_RETURN.split(raw)):
        if index > 0 and not stream.line_ended:
            pieces.append("\n")
            stream.line_ended = True
        cleaned = clean_unmasked(part)
        if cleaned:
            pieces.append(cleaned)
            stream.line_ended = cleaned.endswith("\n")
    return "".join(pieces)


class BlockWatch:
    """One running block, watched for the console: its output copied as it grows, a heartbeat when all is silent.

    A LiveWatcher calls `tick` while the block runs; once it hands the block
    back, `finish` shows what is left. `at_line_start` and `wrote` tell the
    console where the watch left the log.
    """

    def __init__(
        self,
        name: str,
        paths: Mapping[str, Path],
        write: TextIO,
        *,
        stream: bool,
        heartbeat_s: float,
        at_line_start: bool,
        guard: Callable[[str], str] | None = None,
        starts_in_s: float = 0.0,
    ) -> None:
        self.name = name  # the block's, as the heartbeat says it
        self.paths = dict(paths)  # stdout and stderr, or output alone (merged streams)
        self.followed = (
            [_Followed(n, p, codecs.getincrementaldecoder("utf-8")(errors="replace")) for n, p in paths.items()]
            if stream
            else []
        )
        self.write = write
        self.masker = policy()  # the run's, installed for as long as the block runs
        self.heartbeat_s = heartbeat_s  # 0: no heartbeat
        self.guard = guard  # under Actions, what keeps a line of its own from issuing a command it quotes
        self.at_line_start = at_line_start  # whether what was written last ends a line
        self.line_stream: str | None = None  # the stream whose line was shown last, when not ended
        self.wrote = False  # whether it wrote anything
        # STARTS_IN_S: the block starts after a pause (a retry's), which the log has said: no heartbeat during it
        self.started = time.monotonic() + starts_in_s
        self.last_written = self.started  # the heartbeat speaks after heartbeat_s of silence
        self.ending: str | None = None  # why the harness is ending the block, once it is (a timeout, a stop)

    def tick(self) -> None:
        """Shows the output written since the last tick (--stream), and a heartbeat when one is due."""
        if self.followed:
            self.pump()
        if self.heartbeat_s > 0 and time.monotonic() - self.last_written >= self.heartbeat_s:
            now = time.monotonic()
            self._line(heartbeat_line(self.name, now - self.started, self.paths, self.masker, self.ending))

    def finish(self) -> None:
        """The block has ended: shows the rest of its output (--stream)."""
        if self.followed:
            self.pump(last=True)

    def wait_s(self) -> float | None:
        """How long until the next tick is due; None: never (nothing to watch)."""
        waits = [_POLL_S] if self.followed else []
        if self.heartbeat_s > 0:
            waits.append(max(self.last_written + self.heartbeat_s - time.monotonic(), 0.01))
        return min(waits, default=None)

    def moved(self, paths: Mapping[str, Path]) -> None:
        """The files followed were renamed (an attempt's, kept before the next one): follow them there to their end.

        A read between the rename and this finds no file and reads nothing: what
        was read is counted, so the next read goes on where it stopped.
        """
        for stream in self.followed:
            if stream.name in paths:
                stream.path = paths[stream.name]

    def pump(self, *, last: bool = False) -> None:
        """Shows all that is written so far (up to the limit); LAST: the block has ended, show what is held too."""
        for stream in self.followed:
            if stream.stopped:
                continue
            self._read(stream)
            if stream.stopped:
                stream.raw = stream.held = (
                    ""  # what may begin a secret, an escape sequence or a CRLF: never shown in part
                )
                self._line(
                    f"[... live view of {stream.name} stopped after its first {human_size(LIVE_LIMIT_BYTES)};"
                    f" the whole stream is in {stream.path}]"
                )
            elif last:
                self._take(stream, b"", final=True)
        if last:
            self._unseen_notes()

    def _read(self, stream: _Followed) -> None:
        """Reads STREAM until caught up with the block or at the limit, in bounded reads."""
        try:
            with open(stream.path, "rb") as handle:
                handle.seek(stream.read_bytes)
                while chunk := handle.read(min(_READ_BYTES, LIVE_LIMIT_BYTES - stream.read_bytes)):
                    stream.read_bytes += len(chunk)
                    self._take(stream, chunk)
        except OSError:
            pass  # not created yet, or removed by the block: what was read is shown, the rest is in the report
        stream.stopped = stream.read_bytes >= LIVE_LIMIT_BYTES

    def _take(self, stream: _Followed, chunk: bytes, *, final: bool = False) -> None:
        """Shows what CHUNK completes of STREAM, holding back what may continue in the next read."""
        raw = stream.raw + stream.decoder.decode(chunk, final=final)
        complete = len(raw) if final else partial_escape_start(raw)
        stream.raw = raw[complete:]
        text = stream.held + _redraws_as_lines(stream, raw[:complete])
        cut = len(text) if final else self.masker.clear_cut(text, self.masker.partial_secret_start(text))
        stream.held = text[cut:]
        self._show(stream.name, self.masker.mask(text[:cut]))

    def _unseen_notes(self) -> None:
        for stream in self.followed:
            try:
                unseen_bytes = stream.path.stat().st_size - stream.read_bytes if stream.stopped else 0
            except OSError:
                continue  # removed by the block: the note at the limit said where it was
            if unseen_bytes > 0:
                self._line(
                    f"[... {plural(unseen_bytes, 'byte')} of {stream.name} not shown live, after its first"
                    f" {human_size(LIVE_LIMIT_BYTES)}; the whole stream is in {stream.path}]"
                )

    def _show(self, stream: str, text: str) -> None:
        """Masked block output of STREAM, each of its lines started with the stream's prefix.

        A line the other stream left unended is ended first: a stdout fragment and
        a stderr fragment never share a line. The prefixes go in after masking, at
        line starts only, so they cannot split a secret.
        """
        if not text:
            return
        pieces = []
        if not self.at_line_start and self.line_stream != stream:
            pieces.append("\n")
            self.at_line_start = True
        for part in re.findall(r"[^\n]*\n|[^\n]+", text):  # lines as the log ends them: at \n alone
            if self.at_line_start:
                pieces.append(STREAM_PREFIXES[stream])
            pieces.append(part)
            self.at_line_start = part.endswith("\n")
        self.line_stream = None if self.at_line_start else stream
        self._write("".join(pieces))

    def _line(self, text: str) -> None:
        """A line of the harness's own (a note, a heartbeat), on a line of its own."""
        text = clean_text(text, self.masker)
        if self.guard is not None:
            text = self.guard(text)
        self._write(("" if self.at_line_start else "\n") + text + "\n")
        self.at_line_start, self.line_stream = True, None

    def _write(self, text: str) -> None:
        self.write.write(text)
        self.write.flush()
        self.wrote = True
        self.last_written = time.monotonic()


class LiveWatcher(threading.Thread):
    """The one thread of a run that watches its running block (a BlockWatch), started once, signal-deaf.

    A thread per block would cost each block a thread's start and join, and
    the signal masks around its start. The watcher ticks the block it is given
    only while holding its lock; `unfollow` takes the lock, so once it returns
    the console is the main thread's alone again. It is woken only when it
    must be: a block handed over while it sleeps past the block's first tick
    (a heartbeat minutes away is not worth a wake-up per block).
    """

    def __init__(self) -> None:
        super().__init__(daemon=True, name="live-watch")
        self._changed = threading.Condition()
        self._watch: BlockWatch | None = None
        self._wakes_at: float | None = None  # when its sleep ends (monotonic); None: until woken
        self._closed = False

    def run(self) -> None:
        with self._changed:
            while not self._closed:
                watch = self._watch
                wait_s = watch.wait_s() if watch is not None else None
                self._wakes_at = None if wait_s is None else time.monotonic() + wait_s
                self._changed.wait(wait_s)
                if watch is not None and self._watch is watch and not self._closed:
                    watch.tick()

    def follow(self, watch: BlockWatch) -> None:
        """Watch WATCH's block from now on."""
        with self._changed:
            self._watch = watch
            first_tick_s = watch.wait_s()
            if self._wakes_at is None or (
                first_tick_s is not None and time.monotonic() + first_tick_s < self._wakes_at
            ):
                self._changed.notify()

    def unfollow(self) -> None:
        """Stop watching the block; from the return on, the watcher writes nothing for it (it may wake for nothing)."""
        with self._changed:
            self._watch = None

    def close(self) -> None:
        """End the thread (after `unfollow`)."""
        with self._changed:
            self._closed = True
            self._watch = None
            self._changed.notify()
        self.join()
