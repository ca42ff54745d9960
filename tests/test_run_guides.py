"""The guides a run is given: one from a URL (its token shown nowhere), several in order each with its own stores,
the longest names a file system allows, one whose working directory an earlier guide removed."""

from __future__ import annotations

import json
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FENCE = "```"


def test_guide_from_a_url(tmp_path: Path, run_harness) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "g.md").write_text(
        f'{FENCE}shell #test id="u"\necho remote\n{FENCE}\n\n{FENCE}shell #test-result id="u"\nremote\n{FENCE}\n'
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/g.md"
        done = run_harness(url, "--output-dir", str(tmp_path / "out"))
        missing = run_harness(url + ".nope")
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "out" / "results.json").read_text())["blocks"][0]["status"] == "passed"
    assert missing.returncode == 2 and "cannot fetch the guide" in missing.stderr


def test_a_token_in_a_guide_url_is_shown_nowhere(tmp_path: Path, run_harness) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "g.md").write_text(f"{FENCE}shell #test-setup\necho remote; exit 1\n{FENCE}\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = "tok_s3cret_in_the_url"
    base = f"http://reader:{token}-pw@127.0.0.1:{server.server_address[1]}"
    try:
        runs = [
            run_harness(url, "--output-dir", str(tmp_path / "out"), "--junit", str(junit))
            for url, junit in (
                (f"{base}/g.md?token={token}&ref=main", tmp_path / "j.xml"),
                (f"{base}/missing.md?token={token}", tmp_path / "missing.xml"),
            )
        ]
    finally:
        server.shutdown()
    assert runs[0].returncode == 1 and "remote" in runs[0].stdout, runs[0].stdout + runs[0].stderr
    assert runs[1].returncode == 2 and "cannot fetch the guide" in runs[1].stderr
    assert "token=***" in runs[1].stderr
    shown = [r.stdout + r.stderr for r in runs] + [(tmp_path / "out" / "results.json").read_text()]
    shown.append((tmp_path / "j.xml").read_text())
    for text in shown:
        assert token not in text


def test_several_guides_run_in_order_each_with_its_own_stores(tmp_path: Path, run_harness) -> None:
    one = tmp_path / "one.md"
    two = tmp_path / "two.md"
    one.write_text(f'{FENCE}shell #test-setup store="v"\necho one\n{FENCE}\n')
    two.write_text(
        f'{FENCE}shell #test-setup store="v"\necho two\n{FENCE}\n\n'
        f'{FENCE}shell #test id="t" load="v>>V"\necho <V>\n{FENCE}\n\n{FENCE}shell #test-result id="t"\none\n{FENCE}\n'
    )
    done = run_harness(str(one), str(two), "--output-dir", "out", "--junit", "j.xml")
    assert done.returncode == 1
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(b["guide"].rsplit("/", 1)[-1], b["status"]) for b in record["blocks"]] == [
        ("one.md", "passed"),
        ("two.md", "passed"),
        ("two.md", "mismatch"),
    ]
    assert (tmp_path / "j.xml").read_text().count("<testsuite ") == 2
    assert done.stdout.index("one.md: PASSED") < done.stdout.index("two.md: FAILED")


def test_a_guide_whose_workdir_an_earlier_guide_removed_fails_and_the_reports_are_kept(
    tmp_path: Path, run_harness
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text(f'{FENCE}shell #test-setup id="removes"\nrm -rf "{workdir}"\necho gone\n{FENCE}\n')
    second.write_text(f'{FENCE}shell #test-setup id="needs-it"\necho never\n{FENCE}\n')
    done = run_harness(
        *(str(first), str(second), "--workdir", str(workdir)),
        *("--output-dir", str(tmp_path / "out"), "--junit", str(tmp_path / "junit.xml")),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    blocks = {b["id"]: b for b in json.loads((tmp_path / "out" / "results.json").read_text())["blocks"]}
    assert blocks["removes"]["status"] == "passed"
    assert blocks["needs-it"]["status"] == "error"
    assert f"cannot enter the working directory {workdir}" in blocks["needs-it"]["message"]
    assert "<testsuite" in (tmp_path / "junit.xml").read_text()


def test_guides_with_the_longest_names_a_file_system_allows_run_together(tmp_path: Path, run_harness) -> None:
    # 250 bytes and 2-byte characters: a block's file name carries the guide's name, cut to leave it room
    names = ["g" * 247 + ".md", "é" * 123 + "x.md"]
    for name in names:
        (tmp_path / name).write_text(f'{FENCE}shell #test-setup id="{"b" * 40}"\necho ok\n{FENCE}\n', encoding="utf-8")
    done = run_harness(*names, "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    blocks = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["blocks"]
    assert [block["status"] for block in blocks] == ["passed", "passed"]
    files = sorted(path.name for path in (tmp_path / "out" / "blocks").iterdir())
    assert [name.split("-")[0] for name in files] == ["1", "2"], files  # each guide's own, told apart by number
    assert all(len(name.encode()) < 255 for name in files)
    assert [(tmp_path / "out" / block["stdout_path"]).read_text() for block in blocks] == ["ok\n", "ok\n"]
