"""`python -m ci.run GUIDE --update --from-run DIR`: wildcard-preserving rewrites, and nothing else touched."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci.expect.match import matches
from ci.maintain.realign import updated_body

ROOT = Path(__file__).resolve().parents[1]
FENCE = "```"
TRAILING = "   "  # kept out of the source line, where linters would strip it


@pytest.mark.parametrize(
    ("body", "output", "tokens", "values", "expected"),
    [
        pytest.param("pid xxx\nversion 1.2", "pid 991\nversion 1.3\n", ["xxx"], {}, "pid xxx\nversion 1.3", id="issue"),
        pytest.param("Python 3.11.xxx", "Python 3.12.4", ["xxx"], {}, "Python 3.12.xxx", id="inline-wildcard-kept"),
        pytest.param(
            "version=1.2.xxx (build xxx)",
            "version=1.3.0 (build 77)",
            ["xxx"],
            {},
            "version=1.3.xxx (build xxx)",
            id="two-wildcards-one-line",
        ),
        pytest.param(
            "xxx\nsmoke: exited, elapsed=xxx\nsmoke: OK",
            "[12:00] elapsed=60\n[12:01] elapsed=120\nsmoke: exited, elapsed=130\nsmoke: OK - done\n",
            ["xxx"],
            {},
            "xxx\nsmoke: exited, elapsed=xxx\nsmoke: OK - done",
            id="wildcard-line-keeps-covering-lines",
        ),
        pytest.param(
            "Loading...\nready on port ...\ndone",
            "Loading model\n shard 1\n shard 2\nready on port 8080\nall done",
            ["..."],
            {},
            "Loading...\nready on port ...\nall done",
            id="trailing-wildcard-spans-lines",
        ),
        pytest.param("a\nb\nc", "a\nc", ["..."], {}, "a\nc", id="line-removed"),
        pytest.param("a\nb\nc", "a\nb\nnew\nc", ["..."], {}, "a\nb\nnew\nc", id="line-added"),
        pytest.param("count: 4", "count: 8", [], {}, "count: 8", id="disable-fuzzy"),
        pytest.param("model at <P> v1", "model at /tmp/m v2", ["..."], {"P": "/tmp/m"}, "model at <P> v2", id="load"),
        pytest.param(
            "path <P>\nstatus ...\nv1",
            "path /srv/x\nstatus up 3 days\nv2",
            ["..."],
            {"P": "/srv/x"},
            "path <P>\nstatus ...\nv2",
            id="load-line-kept",
        ),
        pytest.param("same ...", "same thing\n\n", ["..."], {}, "same ...", id="already-matches"),
        pytest.param("anything", "", ["..."], {}, "", id="empty-output"),
    ],
)
def test_updated_body(body: str, output: str, tokens: list[str], values: dict[str, str], expected: str) -> None:
    new_body = updated_body(body, output, tokens, values)
    assert new_body == expected
    substituted = new_body
    for placeholder, value in values.items():
        substituted = substituted.replace(f"<{placeholder}>", value)
    assert matches(output, substituted, tokens)


def test_wildcard_line_over_a_long_output_is_kept() -> None:
    body = "start\n...\n" + "\n".join(f"step {i}: ..." for i in range(18)) + "\nexit 1"
    progress = "\n".join(f"progress {i}%" for i in range(50_000))
    output = f"start\n{progress}\n" + "\n".join(f"step {i}: ok" for i in range(18)) + "\nexit 0\n"
    assert updated_body(body, output, ["..."]) == body.replace("exit 1", "exit 0")


def test_literal_output_that_cannot_be_written_back() -> None:
    # the output holds the placeholder itself, which the next run would substitute
    assert updated_body("v <P>", "v <P> literally", ["..."], {"P": "x"}) is None


_LINES = st.lists(st.sampled_from(["a", "b", "pid 1", "pid 22", "v1.2", "v1.3", "", "x y"]), min_size=0, max_size=6)
_BODY_LINES = st.lists(st.sampled_from(["a", "b", "pid ...", "v1.2", "v1....", "...", "x ... y", ""]), max_size=6)


@settings(max_examples=300, deadline=None)
@given(body=_BODY_LINES, output=_LINES)
def test_updated_body_always_matches_the_new_output(body: list[str], output: list[str]) -> None:
    text = "\n".join(output)
    new_body = updated_body("\n".join(body).rstrip("\n"), text, ["..."])
    assert new_body is not None
    assert matches(text, new_body, ["..."])
    if matches(text, "\n".join(body).rstrip("\n"), ["..."]):
        assert new_body == "\n".join(body).rstrip("\n")  # a body that still matches is left as it is


RunHarness = Callable[..., subprocess.CompletedProcess[str]]  # the run_harness fixture


def run_guide(run_harness: RunHarness, guide: Path, output_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_harness(str(guide), "--output-dir", str(output_dir), "--keep-going", cwd=guide.parent, env=env)


def update(run_harness: RunHarness, guide: Path, output_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_harness(str(guide), "--update", "--from-run", str(output_dir), cwd=guide.parent, env=env)


GUIDE = f"""\
# Update me

Some prose that must survive byte for byte: trailing spaces here{TRAILING}
and a tab\there.

{FENCE}shell #test-setup store="who"
echo world
{FENCE}

{FENCE}shell #test id="greet" load="who>>NAME"
echo "hello <NAME>"
echo "pid $$"
echo "version 1.3"
{FENCE}

{FENCE}shell #test-result id="greet" load="who>>NAME" fuzzy='xxx'
hello <NAME>
pid xxx
version 1.2
{FENCE}

{FENCE}shell #test id="fine"
echo stays
{FENCE}

{FENCE}shell #test-result id="fine"
stays
{FENCE}

1. A step in a list:

   {FENCE}shell #test id="listed"
   printf 'a\\n\\nb\\n'
   {FENCE}

   {FENCE}shell #test-result id="listed"
   a
   c
   {FENCE}

> {FENCE}shell #test id="quoted"
> echo new
> {FENCE}
>
> {FENCE}shell #test-result id="quoted"
> old
> {FENCE}
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["no-bom", "bom"])
def test_update_rewrites_only_the_mismatched_bodies(tmp_path: Path, run_harness, newline: str, bom: bytes) -> None:
    guide = tmp_path / "guide.md"
    original = bom + GUIDE.replace("\n", newline).encode("utf-8")
    guide.write_bytes(original)
    first = run_guide(run_harness, guide, tmp_path / "out")
    assert first.returncode == 1, first.stdout + first.stderr
    statuses = {b["id"]: b["status"] for b in json.loads((tmp_path / "out" / "results.json").read_text())["blocks"]}
    assert statuses == {
        None: "passed",
        "greet": "mismatch",
        "fine": "passed",
        "listed": "mismatch",
        "quoted": "mismatch",
    }

    done = update(run_harness, guide, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "updated 3 #test-result blocks" in done.stderr
    assert "-version 1.2" in done.stdout and "+version 1.3" in done.stdout
    assert done.stdout.startswith(f"--- a/{guide}")

    expected = (
        GUIDE.replace("pid xxx\nversion 1.2\n", "pid xxx\nversion 1.3\n")
        .replace("   a\n   c\n", "   a\n\n   b\n")
        .replace("> old\n", "> new\n")
    )
    assert guide.read_bytes() == bom + expected.replace("\n", newline).encode("utf-8")

    again = run_guide(run_harness, guide, tmp_path / "out2")
    assert again.returncode == 0, again.stdout + again.stderr
    nothing = update(run_harness, guide, tmp_path / "out2")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "nothing to update" in nothing.stderr


# a #test whose output changed, which --update rewrites beside the blocks it must leave alone (2 where 1 was written)
SIMPLE = f"""\
{FENCE}shell #test id="simple"
echo 2
{FENCE}

{FENCE}shell #test-result id="simple"
1
{FENCE}
"""


def test_update_leaves_alone_what_it_cannot_rewrite_safely(tmp_path: Path, run_harness) -> None:
    guide = tmp_path / "guide.md"
    text = f"""\
{FENCE}shell #test id="fence"
printf 'ok\\n{FENCE}\\n'
{FENCE}

{FENCE}shell #test-result id="fence"
ok
{FENCE}

{FENCE}shell #test id="edited"
echo one
{FENCE}

{FENCE}shell #test-result id="edited"
two
{FENCE}

"""
    text += SIMPLE
    guide.write_text(text, encoding="utf-8")
    assert run_guide(run_harness, guide, tmp_path / "out").returncode == 1
    # the command changed after the run: its recorded output may be stale
    guide.write_text(text.replace("echo one", "echo three"), encoding="utf-8")
    done = update(run_harness, guide, tmp_path / "out")
    assert done.returncode == 1, done.stderr
    assert "id='fence': the new output holds a line that would close the fence" in done.stderr
    assert "id='edited': the command changed since that run" in done.stderr
    assert guide.read_text(encoding="utf-8") == text.replace("echo one", "echo three").replace(
        'id="simple"\n1\n', 'id="simple"\n2\n'
    )


def test_update_input_errors(tmp_path: Path, run_harness) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f'{FENCE}shell #test id="a"\necho a\n{FENCE}\n\n{FENCE}shell #test-result id="a"\na\n{FENCE}\n')
    missing = update(run_harness, guide, tmp_path / "nowhere")
    assert missing.returncode == 2
    assert "results.json does not exist" in missing.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.json").write_text(
        json.dumps({"version": 1, "exit_status": 1, "guides": [], "blocks": []})
    )
    unrelated = update(run_harness, guide, tmp_path / "other")
    assert unrelated.returncode == 2
    assert "is not a guide of the run" in unrelated.stderr
    (tmp_path / "other" / "results.json").write_text("[1, 2")
    assert "is not valid JSON" in update(run_harness, guide, tmp_path / "other").stderr
    alone = run_harness(str(guide), "--from-run", str(tmp_path / "other"))
    assert alone.returncode == 2
    assert "--from-run DIR goes with --update" in alone.stderr
    assert guide.read_text().count("echo a") == 1


def test_update_finds_the_guide_under_another_path(tmp_path: Path, run_harness) -> None:
    """The run was made from another directory (as CI does); the guide is found by its trailing path."""
    docs = tmp_path / "docs"
    docs.mkdir()
    guide = docs / "g.md"
    guide.write_text(
        f'{FENCE}shell #test id="a"\necho new\n{FENCE}\n\n{FENCE}shell #test-result id="a"\nold\n{FENCE}\n'
    )
    run_harness("docs/g.md", "--output-dir", str(tmp_path / "out"))
    done = run_harness("g.md", "--update", "--from-run", "../out", cwd=docs)
    assert done.returncode == 0, done.stderr
    assert "\nnew\n" in guide.read_text()


def test_a_loaded_value_of_several_lines_is_left_for_a_person(tmp_path: Path, run_harness) -> None:
    guide = tmp_path / "guide.md"
    text = f"""\
{FENCE}shell #test-setup store="lines"
printf 'one\\ntwo\\n'
{FENCE}

{FENCE}shell #test id="echoed" load="lines>>V"
echo "<V>"
echo three
{FENCE}

{FENCE}shell #test-result id="echoed" load="lines>>V"
<V>
four
{FENCE}

"""
    text += SIMPLE
    guide.write_text(text, encoding="utf-8")
    assert run_guide(run_harness, guide, tmp_path / "out").returncode == 1
    done = update(run_harness, guide, tmp_path / "out")
    assert done.returncode == 1, done.stderr
    assert "id='echoed': a loaded value spans several lines; update this #test-result by hand" in done.stderr
    assert guide.read_text(encoding="utf-8") == text.replace('id="simple"\n1\n', 'id="simple"\n2\n')


def test_update_writes_no_secret_into_the_guide(tmp_path: Path, run_harness) -> None:
    secret = "hf_printed_by_a_block_77"
    guide = tmp_path / "guide.md"
    text = f"""\
{FENCE}shell #test id="login"
echo "logged in with $HF_TOKEN"
echo "user: $USER_NAME"
{FENCE}

{FENCE}shell #test-result id="login"
logged in
{FENCE}

{FENCE}shell #test id="plain"
echo "token $HF_TOKEN used"
echo 2
{FENCE}

{FENCE}shell #test-result id="plain"
token ... used
1
{FENCE}
"""
    guide.write_text(text, encoding="utf-8")
    env = {"HF_TOKEN": secret, "USER_NAME": "someone"}
    assert run_guide(run_harness, guide, tmp_path / "out", **env).returncode == 1
    done = update(run_harness, guide, tmp_path / "out", **env)
    assert done.returncode == 1, done.stderr
    assert "id='login': the new expected body would hold a secret value the block printed; left alone" in done.stderr
    assert secret not in guide.read_text(encoding="utf-8")
    assert secret not in done.stdout + done.stderr
    # the other block is updated, its wildcard still covering the secret
    assert guide.read_text(encoding="utf-8") == text.replace("used\n1\n", "used\n2\n")
    assert "+2" in done.stdout.splitlines()


@pytest.mark.parametrize("planted", ["absolute", "dot-dot", "symbolic-link"])
def test_a_record_naming_a_file_outside_its_directory_is_refused(tmp_path: Path, run_harness, planted: str) -> None:
    """A run's record from elsewhere (a CI artifact) must not make the update copy a file of this machine into the
    guide: every output file it names is inside its own directory."""
    private = tmp_path / "private.txt"
    private.write_text("ssh-private-key-material\n", encoding="utf-8")
    text = f'{FENCE}shell #test id="a"\necho new\n{FENCE}\n\n{FENCE}shell #test-result id="a"\nold\n{FENCE}\n'
    (tmp_path / "docs").mkdir()
    guide = tmp_path / "docs" / "guide.md"
    guide.write_text(text, encoding="utf-8")
    output_dir = tmp_path / "artifact"
    assert run_guide(run_harness, guide, output_dir).returncode == 1
    record = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    (block,) = record["blocks"]
    if planted == "absolute":
        block["stdout_path"] = str(private)
    elif planted == "dot-dot":
        block["stdout_path"] = "../private.txt"
    else:
        (output_dir / block["stdout_path"]).unlink()
        (output_dir / block["stdout_path"]).symlink_to(private)
    (output_dir / "results.json").write_text(json.dumps(record), encoding="utf-8")
    done = update(run_harness, guide, output_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "[ERROR] --from-run: " in done.stderr and "leads out of" in done.stderr
    assert guide.read_text(encoding="utf-8") == text
    assert "ssh-private" not in done.stdout + done.stderr
