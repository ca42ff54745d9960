"""Secrets are masked in every form and every place: lines, overlaps, encodings, escapes, file names, --update."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ci.base.masking import Masker

FENCE = "```"
KEY_LINES = [
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACDx0kGNDeCpEBw0sJ6kYBcnGnZJ1mFqD1y7t3PpWqg3xgAAAJgF2u1zBdrt",
    "-----END OPENSSH PRIVATE KEY-----",
]
SECRETS = {
    "SSH_PRIVATE_KEY": "\n".join(KEY_LINES) + "\n",
    "A_TOKEN": "alpha-1234-overlap",
    "B_TOKEN": "overlap-5678-omega",
    "DB_PASSWORD": 's3cr3t/p@ss word+"x"',
    "LONG_PASSWORD": "correcthorsebatterystaple",
    "PIN_TOKEN": "4111111111111111",
    "HF_TOKEN": "hf_s3cr3t_value_123",
}
PASSWORD = SECRETS["DB_PASSWORD"]
ENCODED = [urllib.parse.quote(PASSWORD, safe=""), json.dumps(PASSWORD)[1:-1]]
AS_BASE64 = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
GUIDE = f"""
    ---
    ci:
      collect: ["leak-*.log"]
    ---
    {FENCE}shell #test id="forms"
    python3 -c 'import os; print("line:", os.environ["SSH_PRIVATE_KEY"].splitlines()[1])'
    printf 'both: %s\\n' "$A_TOKEN${{B_TOKEN#overlap}}"
    printf 'auth: %s\\n' "$(printf 'user:%s' "$DB_PASSWORD" | base64 -w0)"
    printf 'plain: %s %s\\n' "$LONG_PASSWORD" "$PIN_TOKEN"
    printf 'coloured: \\033[1;31m%s\\033[0m%s\\n' "${{HF_TOKEN:0:5}}" "${{HF_TOKEN:5}}"
    touch "leak-$HF_TOKEN.log"
    {FENCE}

    {FENCE}shell #test-result id="forms"
    nothing
    {FENCE}

    {FENCE}shell #test id="encoded"
    python3 -c 'import json, os, urllib.parse as u; p = os.environ["DB_PASSWORD"]; print(u.quote(p, safe="")); print(json.dumps({{"p": p}}))'
    {FENCE}

    {FENCE}shell #test-result id="encoded"
    nothing
    {FENCE}
    """


def _forbidden() -> list[str]:
    """Every secret, and every part of one the guide prints in some form, that no report may show."""
    values = [value.strip() for value in SECRETS.values()]
    parts = [KEY_LINES[1], "1234-overlap", "overlap-5678", "5678-omega", AS_BASE64[8:-4], *ENCODED]
    return values + parts + ["hf_s3", "cr3t_value_123"]


def test_every_form_of_a_secret_is_masked_in_every_report_file_and_name(guide_runner, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run = guide_runner(GUIDE, "--keep-going", "--mask-files", "--junit", str(junit), env=SECRETS)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.statuses() == {"forms": "mismatch", "encoded": "mismatch"}, run.stdout
    shown = {
        "console": run.stdout + run.stderr,
        "junit": junit.read_text(),
        "results.json": (run.output_dir / "results.json").read_text(),
    }
    kept = [path for path in run.output_dir.rglob("*") if path.is_file() and path.name != "results.json"]
    shown.update({str(path): path.read_text(errors="replace") for path in kept})
    shown["names"] = "\n".join(str(path.relative_to(run.output_dir)) for path in run.output_dir.rglob("*"))
    for where, text in shown.items():
        for secret in _forbidden():
            assert secret not in text, f"{secret!r} shows in {where}"
    assert "line: ***" in run.stdout and "plain: *** ***" in run.stdout
    assert any(path.name == "leak-***.log" for path in kept)
    collected = json.loads(shown["results.json"])["guides"][0]["collected"]["files"]
    assert [Path(entry["source"]).name for entry in collected] == ["leak-***.log"]


def test_update_never_writes_an_encoded_secret_into_the_guide(guide_runner) -> None:
    run = guide_runner(GUIDE, "--update", "--keep-going", env=SECRETS)
    written = run.guide.read_text(encoding="utf-8")
    for secret in _forbidden():
        assert secret not in written
    assert "#test id='encoded': the new expected body would hold a secret value" in run.stderr


_SECRET_TEXT = st.text("ab-", min_size=6, max_size=10).filter(lambda value: "-" in value)


@given(
    secrets=st.lists(_SECRET_TEXT, min_size=1, max_size=3),
    pieces=st.lists(st.integers(0, 5), max_size=12),
    chunk_bytes=st.integers(1, 12),
)
@settings(max_examples=200, deadline=None)
def test_masking_leaves_no_part_of_any_secret_and_files_mask_as_the_whole(
    secrets: list[str], pieces: list[int], chunk_bytes: int
) -> None:
    masker = Masker.of(secrets)
    words = [*secrets, *(secret[1:] for secret in secrets), "a", "-", " "]
    text = "".join(words[index % len(words)] for index in pieces)
    masked = masker.mask(text)
    for secret in secrets:
        assert secret not in masked
    data = text.encode()
    reads = [data[at : at + chunk_bytes] for at in range(0, len(data), chunk_bytes)]
    assert b"".join(part for _, part in masker.masked_windows(reads)) == masker.mask_bytes(data) == masked.encode()


def test_a_secret_given_with_set_is_masked_in_the_run_as_in_its_listing(guide_runner, tmp_path: Path) -> None:
    """`--set HF_TOKEN=...` names a secret as an environment variable of that name would: no report shows it."""
    guide = """\
        ```shell #test id="token" load="HF_TOKEN>>TOKEN"
        echo "using <TOKEN>"; echo "cannot log in with <TOKEN>" >&2; exit 1
        ```

        ```text #test-result id="token"
        using ...
        ```
        """
    junit = tmp_path / "junit.xml"
    secret = "hf_set_on_the_command_line_42"
    run = guide_runner(guide, "--set", f"HF_TOKEN={secret}", "-v", "--junit", str(junit))
    assert run.returncode == 1 and run.statuses() == {"token": "failed"}, run.stdout + run.stderr
    assert "cannot log in with ***" in run.stdout  # its reason, at the end of the log
    for where, text in (
        ("console", run.stdout + run.stderr),
        ("junit", junit.read_text()),
        ("record", json.dumps(run.record)),
    ):
        assert secret not in text, f"the --set secret shows in {where}"


def test_the_blocks_step_summary_cut_shows_no_part_of_a_secret(guide_runner, tmp_path: Path) -> None:
    """What the blocks wrote to their step summary is shown up to a limit: a secret across that cut shows no part."""
    from ci.report.summary import BLOCKS_SUMMARY_SHOWN_BYTES

    summary = tmp_path / "step-summary.md"
    summary.write_text("", encoding="utf-8")
    before = BLOCKS_SUMMARY_SHOWN_BYTES - 5  # the cut falls after the token's first five characters
    guide = f"""
        {FENCE}shell #test-setup
        python3 -c 'import os; print("a" * {before} + os.environ["HF_TOKEN"] + " done")' >>"$GITHUB_STEP_SUMMARY"
        {FENCE}
        """
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "HF_TOKEN": SECRETS["HF_TOKEN"]}
    run = guide_runner(guide, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    shown = summary.read_text(encoding="utf-8")
    assert "What the guide's blocks wrote to their step summary" in shown and "a" * 1000 in shown
    assert "hf_s3" not in shown and SECRETS["HF_TOKEN"] not in shown


# a block that prints the token it loads, expected to print something else: --update has a body to rewrite
TOKEN_GUIDE = """\
        ```shell #test id="token" load="HF_TOKEN>>TOKEN"
        echo "logged in with <TOKEN>"
        ```

        ```text #test-result id="token"
        logged in
        ```
        """


def test_update_after_a_run_keeps_a_secret_given_with_set_out_of_the_guide(guide_runner) -> None:
    """`--update` rewrites from what the run printed: a secret the run knew from `--set` stays out of the guide."""
    secret = "hf_set_on_the_command_line_42"
    run = guide_runner(TOKEN_GUIDE, "--update", "--set", f"HF_TOKEN={secret}")
    written = run.guide.read_text(encoding="utf-8")
    assert secret not in written and secret not in run.stdout + run.stderr
    assert "the new expected body would hold a secret value" in run.stderr


def test_update_from_a_kept_run_keeps_a_loaded_secret_out_of_the_guide(guide_runner, run_harness) -> None:
    """`--update --from-run DIR` knows the secret it is given (`--set`), and leaves alone a block that loaded a
    secret it is not given: the output may hold it, and the guide is published."""
    secret = "hf_kept_run_secret_42"
    run = guide_runner(TOKEN_GUIDE, "--set", f"HF_TOKEN={secret}")
    assert run.returncode == 1, run.stdout + run.stderr
    for set_option in (["--set", f"HF_TOKEN={secret}"], []):
        update = run_harness(str(run.guide), "--update", "--from-run", str(run.output_dir), *set_option)
        assert secret not in run.guide.read_text(encoding="utf-8") and secret not in update.stdout + update.stderr
        assert update.returncode == 1, update.stdout + update.stderr
    assert (
        "the new expected body would hold a secret value"
        in run_harness(
            str(run.guide), "--update", "--from-run", str(run.output_dir), "--set", f"HF_TOKEN={secret}"
        ).stderr
    )
    assert "loaded HF_TOKEN, secret by its name, whose value this update is not given" in update.stderr
