"""Compatibility: real third-party guides must be accepted unchanged, and planned as their authors meant.

The guides live outside this repository (third-party text, never copied in): $GUIDE_GUARD_COMPAT_DIR, else
../shared/compat/guides beside the checkout. Without them these tests are skipped, unless
GUIDE_GUARD_REQUIRE_EXTERNAL=1 (as under CI) makes that a failure (tests/outside.py). The
expectations below were written by reading each guide; they are the authors' intent,
not output of the parser.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from outside import compat_dir

REPO = Path(__file__).resolve().parents[1]


class Want(NamedTuple):
    """One runnable block as the author wrote it."""

    label: str  # "#test" or "#test-setup"
    name: str | None  # the id of a #test, the store of a #test-setup (None: neither)
    line: int  # line of the opening fence
    hidden: bool
    fuzzy: tuple[str, ...] | None  # wildcard tokens of the #test's result; None for setups


# One entry per guide: its runnable blocks in order, as `KIND NAME LINE [FUZZY]` separated by `|`.
# KIND: T = #test, S = #test-setup, H = #test-setup hidden in an HTML comment; NAME `-` = none;
# FUZZY: the result's wildcard tokens, comma-separated.
_HEAD = "T check-py 52 xxx | T check-torch 62 ..."
_TAIL_A = "T swift-install-source 134 xxx | T train 152 xxx | S checkpoint 194 | T infer 216 xxx"
_TAIL_B = "T swift-install-source 132 xxx | T train 150 xxx | S checkpoint 192 | T infer 214 xxx"
_TAIL_B2 = "T swift-install-source 132 xxx | T train 150 xxx,... | S checkpoint 192 | T infer 214 xxx,..."
_TAIL_C = "T swift-install-source 115 xxx | T train 133 xxx | S checkpoint 175 | T infer 197 xxx"
_SETUP_BINARY = "S swift-install-binary 106 | H - 120 | H upstream_ref 127"
_TEST_BINARY_B = "T swift-install-binary 106 xxx | H - 118 | H upstream_ref 125"
PLANS: dict[str, str] = {
    "ms-swift-2026-08-21-33ca04ea.md": f"{_HEAD} | {_SETUP_BINARY} | {_TAIL_A}",
    "ms-swift-2026-08-21-abad7ea4.md": f"{_HEAD} | {_SETUP_BINARY} | {_TAIL_A}",
    "ms-swift-2026-08-21-bbe48099.md": f"{_HEAD} | {_SETUP_BINARY} | {_TAIL_A}",
    "ms-swift-2026-08-21-cc3ce28e.md": f"{_HEAD} | {_SETUP_BINARY} | {_TAIL_A}",
    "ms-swift-2026-08-21-b02c2db5.md": f"{_HEAD} | T swift-install-binary 106 xxx | H - 120 | H upstream_ref 127 | {_TAIL_A}",
    "ms-swift-2026-08-21-510f87af.md": (
        f"{_HEAD} | T swift-install-binary 106 xxx | H - 119 | H upstream_ref 126 | "
        "T swift-install-source 133 xxx | T train 151 xxx | S checkpoint 193 | T infer 215 xxx"
    ),
    "ms-swift-2026-08-21-3e91aba8.md": f"{_HEAD} | {_TEST_BINARY_B} | {_TAIL_B}",
    "ms-swift-2026-08-21-7ecddb14.md": f"{_HEAD} | {_TEST_BINARY_B} | {_TAIL_B}",
    "ms-swift-2026-08-21-b48579e2.md": f"{_HEAD} | T swift-install-binary 106 4.5.2 | H - 118 | H upstream_ref 125 | {_TAIL_B}",
    "ms-swift-2026-08-22-0821c458.md": f"{_HEAD} | {_TEST_BINARY_B} | {_TAIL_B2}",
    "ms-swift-2026-08-22-edffc295.md": f"{_HEAD} | {_TEST_BINARY_B} | {_TAIL_B2}",
    "ms-swift-2026-08-23-7b19deed.md": f"{_HEAD} | {_TEST_BINARY_B} | {_TAIL_B2}",
    "ms-swift-2026-08-21-41e89852.md": (
        f"{_HEAD} | H upstream_ref 119 | "
        "T swift-install-source 126 xxx | T train 144 xxx | S checkpoint 186 | T infer 208 xxx"
    ),
    "ms-swift-2026-08-21-f06d49a1.md": f"{_HEAD} | H upstream_ref 108 | {_TAIL_C}",
    "ms-swift-2026-08-22-1ea41ad7.md": (
        f"{_HEAD} | H upstream_ref 108 | "
        "T swift-install-source 115 xxx | T train 133 xxx,... | S checkpoint 175 | T infer 197 xxx,..."
    ),
    "ms-swift-2026-08-22-ad5235f0.md": (
        f"{_HEAD} | H upstream_ref 108 | "
        "T swift-install-source 115 xxx | T train 133 ... | S checkpoint 175 | T infer 197 xxx,..."
    ),
    "ms-swift-2026-08-22-e526b6e6.md": (
        f"{_HEAD} | H upstream_ref 108 | "
        "T swift-install-source 117 xxx | T train 135 xxx | S checkpoint 177 | T infer 199 xxx"
    ),
}
# Guides whose `#test-result id="swift-install-binary"` follows a setup, not a #test: ignored, with a warning.
ORPHAN_RESULT_LINE = {name: 115 for name in PLANS if "S swift-install-binary" in PLANS[name]}
LOADS = {"swift-install-source": [["upstream_ref", "ref"]], "infer": [["checkpoint", "ckpt"]]}
EXPECTED_BODIES = {
    "check-py": "Python 3.12.xxx",
    "check-torch": "torch= 2.9.0+cpu\ntorch_npu= 2.9.0.post2\nis_available: True\ncount: 1",
}
GUIDE_NAMES = sorted(PLANS)


def _wants(spec: str) -> list[Want]:
    wants = []
    for item in spec.split("|"):
        kind, name, line, *fuzzy = item.split()
        wants.append(
            Want(
                label="#test" if kind == "T" else "#test-setup",
                name=None if name == "-" else name,
                line=int(line),
                hidden=kind == "H",
                fuzzy=tuple(fuzzy[0].split(",")) if fuzzy else None,
            )
        )
    return wants


def _guide_path(name: str) -> Path:
    corpus = compat_dir()
    path = corpus / name
    assert path.is_file(), f"compat guide {name} is missing from {corpus}"
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci.run", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


@cache
def _json_plan(name: str) -> tuple[int, str, str]:
    done = _cli(str(_guide_path(name)), "--list", "--format", "json")
    return done.returncode, done.stdout, done.stderr


def _entries(name: str) -> list[dict[str, Any]]:
    code, stdout, stderr = _json_plan(name)
    assert code == 0, f"{name}: --list --format json exited {code}; stderr:\n{stderr}"
    return json.loads(stdout)


def test_every_compat_guide_has_expectations() -> None:
    on_disk = sorted(path.name for path in compat_dir().glob("*.md"))
    assert on_disk == GUIDE_NAMES, "compat guides and the expectation table differ; add the new guide's intent to PLANS"


@pytest.mark.parametrize("name", GUIDE_NAMES)
def test_compat_guide_is_accepted(name: str) -> None:
    code, _, stderr = _json_plan(name)
    assert code == 0, f"{name}: exit {code}, expected 0; stderr:\n{stderr}"
    assert "[ERROR]" not in stderr, f"{name}: {stderr}"


@pytest.mark.parametrize("name", GUIDE_NAMES)
def test_compat_plan_is_what_the_author_meant(name: str) -> None:
    entries = _entries(name)
    wants = _wants(PLANS[name])
    got = [(e["label"], e["id"] if e["label"] == "#test" else e["store"], e["line"]) for e in entries]
    assert got == [(w.label, w.name, w.line) for w in wants], f"{name}: blocks in order"
    assert [e["ordinal"] for e in entries] == list(range(1, len(wants) + 1)), f"{name}: ordinals"
    for entry, want in zip(entries, wants, strict=True):
        where = f"{name}:{want.line}"
        assert entry["hidden"] is want.hidden, f"{where}: hidden should be {want.hidden}"
        assert entry["language"] == "shell", where
        assert entry["timeout_s"] == 10800, f"{where}: no timeout is written, so the default 10800 s applies"
        assert entry["loads"] == LOADS.get(want.name or "", []), f"{where}: loads"
        if want.label == "#test":
            assert entry["id"] == want.name and entry["store"] is None, where
            assert entry["fuzzy"] == list(want.fuzzy or ()), f"{where}: fuzzy tokens"
            if want.name in EXPECTED_BODIES:
                assert entry["expected"] == EXPECTED_BODIES[want.name], f"{where}: expected body"
        else:
            assert entry["id"] is None and entry["store"] == want.name, where
            assert "expected" not in entry and "fuzzy" not in entry, f"{where}: a setup has no expected output"


@pytest.mark.parametrize("name", GUIDE_NAMES)
def test_compat_orphan_result_is_only_a_warning(name: str) -> None:
    _, _, stderr = _json_plan(name)
    warned = [line for line in stderr.splitlines() if line.startswith("warning:")]
    if name in ORPHAN_RESULT_LINE:
        assert len(warned) == 1, f"{name}: expected one warning, got {warned}"
        assert f"{name}:{ORPHAN_RESULT_LINE[name]}:" in warned[0]
        assert "swift-install-binary" in warned[0]
    else:
        assert warned == [], f"{name}: unexpected warnings {warned}"


@pytest.mark.parametrize("name", GUIDE_NAMES)
def test_compat_text_list(name: str) -> None:
    path = _guide_path(name)
    done = _cli(str(path), "--list")
    assert done.returncode == 0, f"{name}: --list exited {done.returncode}; stderr:\n{done.stderr}"
    wants = _wants(PLANS[name])
    lines = done.stdout.splitlines()
    assert lines[0] == f"{path}: {len(wants)} blocks", f"{name}: header {lines[0]!r}"
    assert len(lines) == 1 + len(wants), f"{name}: one line per block expected:\n{done.stdout}"
    for text, want in zip(lines[1:], wants, strict=True):
        assert f"{path}:{want.line}" in text, f"{name}: {text!r} should point at line {want.line}"
        assert (want.name or "") in text and want.label in text, f"{name}: {text!r}"


def test_cli_reports_document_errors_with_file_and_line(tmp_path: Path) -> None:
    guide = tmp_path / "broken.md"
    guide.write_text(
        '# Broken\n\n```shell #test id="a" colour="red"\necho a\n```\n\n'
        '```shell #test-result id="a"\na\n```\n\n```ruby #test-setup\nputs 1\n```\n',
        encoding="utf-8",
    )
    done = _cli(str(guide), "--list", "--format", "json")
    assert done.returncode == 2, f"exit {done.returncode}; stderr:\n{done.stderr}"
    assert f"[ERROR] {guide}:3:" in done.stderr, done.stderr
    assert f"[ERROR] {guide}:11:" in done.stderr, done.stderr
    assert done.stdout.strip() == "", "nothing is listed when the guide has document errors"
    text = _cli(str(guide), "--list")
    assert text.returncode == 2 and f"[ERROR] {guide}:3:" in text.stderr


def test_cli_set_makes_a_load_valid(tmp_path: Path) -> None:
    guide = tmp_path / "preset.md"
    guide.write_text(
        '# P\n\n```shell #test id="a" load="tok>>TOK"\necho <TOK>\n```\n\n```shell #test-result id="a"\nx\n```\n',
        encoding="utf-8",
    )
    without = _cli(str(guide), "--list", "--format", "json")
    assert without.returncode == 2 and f"[ERROR] {guide}:3:" in without.stderr, without.stderr
    with_set = _cli(str(guide), "--list", "--format", "json", "--set", "tok=v1")
    assert with_set.returncode == 0, with_set.stderr
    assert json.loads(with_set.stdout)[0]["loads"] == [["tok", "TOK"]]
