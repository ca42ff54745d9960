"""What the harness keeps bounded whatever a guide or its blocks do: report sizes, guides read from URLs, stderr scans."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ci.guide.model import DocumentError
from ci.guide.source import URL_LIMIT_BYTES, fetch_url
from ci.record import read_run

REPO = Path(__file__).resolve().parents[1]
FENCE = "```"
MIB = 1024 * 1024
SECRET = "s3cret-in-the-url"
BIG_BYTES = 3_000_000  # a stored value and an expected body far over what the reports show of them
REPORT_LIMIT_BYTES = 200_000  # every report stays under this, whatever the value's size


def test_a_long_stored_value_and_expected_body_are_shown_cut_and_kept_whole_on_disk(
    guide_runner, tmp_path: Path
) -> None:
    """Before, each report held every stored value and expected body in full: three reports of megabytes per value."""
    junit = tmp_path / "junit.xml"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="big"
        head -c {BIG_BYTES} /dev/zero | tr '\\0' a; echo
        {FENCE}

        {FENCE}shell #test-setup store="odd"
        printf 'x\\377'; head -c {BIG_BYTES} /dev/zero | tr '\\0' b
        {FENCE}

        {FENCE}shell #test id="same"
        head -c {BIG_BYTES} /dev/zero | tr '\\0' a
        {FENCE}

        {FENCE}text #test-result id="same" load="big>>BIG"
        <BIG>
        {FENCE}
        """,
        "--junit",
        str(junit),
        "-v",  # the stored values and expected body of passing blocks, in the log too
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    record_path = run.output_dir / "results.json"
    for report in (run.stdout, junit.read_text(encoding="utf-8"), record_path.read_text(encoding="utf-8")):
        assert len(report.encode()) < REPORT_LIMIT_BYTES
    big, odd, same = run.block("big"), run.block("odd"), run.block("same")

    # the stdout file is the value with its trailing newline: it is named, not copied
    assert big["captured_whole"] == {"path": big["stdout_path"], "bytes": BIG_BYTES}
    assert set(big["captured"]["big"]) == {"a"} and len(big["captured"]["big"]) <= 16 * 1024
    assert (run.output_dir / big["stdout_path"]).read_text().rstrip() == "a" * BIG_BYTES
    # an invalid byte is stored replaced: the stdout file is not the value, a file beside it is
    odd_file = odd["captured_whole"]["path"]
    assert odd_file.endswith(".stored.txt") and odd["captured_whole"]["bytes"] == BIG_BYTES + 4
    assert (run.output_dir / odd_file).read_text(encoding="utf-8") == "x\ufffd" + "b" * BIG_BYTES
    # the expected body after substitution is kept whole too
    assert same["status"] == "passed" and same["expected_whole"]["bytes"] == BIG_BYTES
    assert (run.output_dir / same["expected_whole"]["path"]).read_text() == "a" * BIG_BYTES
    assert len(same["expected"]) <= 16 * 1024

    # the log and JUnit say how much is shown and where the rest is
    stored_file = run.output_dir / big["stdout_path"]
    expected_file = run.output_dir / same["expected_whole"]["path"]
    assert f"--- stored big ({BIG_BYTES} bytes)" in run.stdout
    assert f"[... value cut: first 16.0 KiB of 2.9 MiB shown; the whole value is in {stored_file} ...]" in run.stdout
    assert f"the whole expected body is in {expected_file} ...]" in run.stdout
    assert str(expected_file) in junit.read_text(encoding="utf-8")

    # a value recorded cut is no value for --update to re-check with
    recorded = {block.step.store or block.step.id: block for block in read_run(run.output_dir).guides[0].blocks}
    same_expected = recorded["same"].expected
    assert recorded["big"].captured == {} and same_expected is not None and same_expected.whole is None


def test_a_mismatch_on_a_long_expected_line_quotes_a_bounded_part_of_it(guide_runner, tmp_path: Path) -> None:
    """The message (and its annotation) quoted the whole first unmatched line: megabytes when a loaded value is on it."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="big"
        head -c {BIG_BYTES} /dev/zero | tr '\\0' a
        {FENCE}

        {FENCE}shell #test id="differs"
        echo other
        {FENCE}

        {FENCE}text #test-result id="differs" load="big>>BIG"
        <BIG>
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")},
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    message = run.block("differs")["message"]
    assert message == f"stdout does not match the expected output from its line 1: '{'a' * 200}...'"
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 1 and len(annotations[0]) < 1000
    assert len(json.dumps(run.record).encode()) < REPORT_LIMIT_BYTES


def test_a_value_is_loaded_by_every_block_that_names_it_though_values_are_let_go_after_their_last_load(
    guide_runner,
) -> None:
    """The run lets a value go after the last block loading it (its command or its result): none before."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="word"
        echo hello
        {FENCE}

        {FENCE}shell #test id="first" load="word>>W" load="given>>G"
        echo <W> <G>
        {FENCE}

        {FENCE}text #test-result id="first"
        hello preset
        {FENCE}

        {FENCE}shell #test-setup store="other"
        echo unrelated
        {FENCE}

        {FENCE}shell #test id="last"
        echo hello preset
        {FENCE}

        {FENCE}text #test-result id="last" load="word>>W" load="given>>G"
        <W> <G>
        {FENCE}
        """,
        "--set",
        "given=preset",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.statuses() == {"word": "passed", "first": "passed", "other": "passed", "last": "passed"}


class _Trickle(BaseHTTPRequestHandler):
    """Answers at once, then sends its body a byte at a time, never ending: each read is quick, the whole never comes."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up
            while not self.server.stopping.is_set():  # type: ignore[attr-defined]
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(0.1)

    def log_message(self, *args: object) -> None:
        pass


class _Huge(BaseHTTPRequestHandler):
    """A body one MiB over the limit, without a Content-Length: only reading it tells its size."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        chunk = b"# a heading\n" * 8192
        with contextlib.suppress(OSError):  # the client stopped reading
            for _ in range((URL_LIMIT_BYTES + MIB) // len(chunk) + 1):
                self.wfile.write(chunk)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local HTTP server on a free port, in a thread, for the time of the block: its base URL with credentials in it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://reader:{SECRET}@127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def test_a_url_that_never_finishes_is_given_up_at_the_time_limit() -> None:
    """requests' timeout is per read: a byte every 0.1 s kept the fetch going for ever."""
    with _serving(_Trickle) as base, pytest.raises(DocumentError) as raised:
        fetch_url(f"{base}/slow.md?token={SECRET}", time_limit_s=1)
    (problem,) = raised.value.problems
    assert (
        problem.message == "cannot fetch the guide: no whole answer within 1 s, the limit for a guide read from a URL"
    )
    assert SECRET not in str(problem) and problem.file.endswith("/slow.md?token=***")


def test_a_url_guide_over_the_size_limit_is_refused_with_exit_2(tmp_path: Path, run_harness) -> None:
    """Before, the whole body was read into memory, however large (a 3000 MiB one took 6.2 GB)."""
    with _serving(_Huge) as base:
        done = run_harness(f"{base}/huge.md?token={SECRET}", "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "/huge.md?token=***: cannot fetch the guide: it is larger than 16.0 MiB, the limit for a guide read from a URL; download it and pass its path"
        in done.stderr
    )
    assert SECRET not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def _sparse_stderr_block(name: str, marker: str, offset: str) -> str:
    """A setup whose stderr file it makes 20 GiB long (sparse: no disk) with MARKER written at OFFSET bytes."""
    return f"""
        {FENCE}python #test-setup id="{name}"
        import os
        size = 20 * 2**30
        with open(os.readlink("/proc/self/fd/2"), "r+b") as stderr:
            stderr.truncate(size)
            stderr.seek({offset})
            stderr.write(b"{marker}\\n")
        {FENCE}
        """


def test_error_markers_are_looked_for_in_the_first_and_last_8_mib_of_a_huge_stderr(guide_runner) -> None:
    """The whole stderr was scanned: a block making it 20 GiB (sparse, at no cost to itself) held the run 81 s."""
    run = guide_runner(
        _sparse_stderr_block("middle", "MIDDLE_MARK", "size // 2")
        + _sparse_stderr_block("late", "LATE_MARK", "size - 2**20 + 100"),
        "--error-marker",
        "MIDDLE_MARK",
        "--error-marker",
        "LATE_MARK",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    middle, late = run.block("middle"), run.block("late")
    assert middle["stderr_bytes"] == late["stderr_bytes"] == 20 * 2**30
    assert middle["error_marker"] is None  # only in the part not scanned
    assert late["error_marker"] == "LATE_MARK"
    assert "--- stderr (20.0 GiB, contains 'LATE_MARK')" in run.stdout
    assert len(run.stdout.encode()) < REPORT_LIMIT_BYTES
    docs = (REPO / "docs" / "reading-a-run.md").read_text(encoding="utf-8")
    assert "looked for in the first and last 8 MiB of stderr" in docs
