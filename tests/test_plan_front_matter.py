"""Front matter and durations in the plan: the settings read, the time-outs' precedence, and each fault a document
error on its line (collect, diagnostics, cleanup, env, aliases, absurd durations, unknown keys)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_guides import block, pair, plan_of, problems_of

from ci.guide.model import DocumentError
from ci.guide.plan import DEFAULT_TIMEOUT_S, parse_duration


@pytest.mark.parametrize(
    ("front_matter", "default_timeout_s", "block_timeout", "expected"),
    [
        (None, None, None, 10800.0),
        (None, 120.0, None, 120.0),
        ("45m", 120.0, None, 2700.0),
        ("45m", None, None, 2700.0),
        ("45m", 120.0, "30s", 30.0),
        (None, 120.0, "2h", 7200.0),
        (None, None, "90", 90.0),
    ],
)
def test_timeout_precedence(
    front_matter: str | None, default_timeout_s: float | None, block_timeout: str | None, expected: float
) -> None:
    head = f"---\nci:\n  timeout: {front_matter}\n---\n\n" if front_matter else ""
    timeout = f" timeout='{block_timeout}'" if block_timeout else ""
    guide = head + "# T\n\n" + pair("a", test_params=timeout) + block(f"shell #test-setup{timeout}")
    plan = plan_of(guide, default_timeout_s=default_timeout_s)
    assert [s.timeout_s for s in plan.steps] == [expected, expected]
    assert DEFAULT_TIMEOUT_S == 10800.0


def test_block_timeout_applies_to_its_block_only() -> None:
    guide = "---\nci:\n  timeout: 10m\n---\n\n" + pair("a", test_params=' timeout="3h"') + pair("b")
    assert [s.timeout_s for s in plan_of(guide).steps] == [10800.0, 600.0]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("30s", 30.0), ("10m", 600.0), ("3h", 10800.0), ("1.5h", 5400.0), ("0.5m", 30.0), (" 7 ", 7.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "abc", "5 minutes", "10x", "1h30m", "h", "-5", "0", "0s", "3 hours", "1e3", "169h", "9" * 400]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_front_matter_settings() -> None:
    guide = '---\nci:\n  timeout: 90\n  error_markers: [ERR99999]\n  env:\n    PYTHONUNBUFFERED: "1"\n---\n\n' + pair(
        "a"
    )
    settings = plan_of(guide).settings
    assert settings.timeout_s == 90.0
    assert settings.error_markers == ("ERR99999",)
    assert dict(settings.env) == {"PYTHONUNBUFFERED": "1"}


def test_front_matter_collect_and_diagnostics() -> None:
    guide = (
        "---\nci:\n  collect: ['/tmp/smoke-*.log', '~/ascend/log/**/*.log']\n"
        "  diagnostics:\n    - npu-smi info\n    - 'tail -n 50 /tmp/a.log: x'\n  diagnostics_timeout: 30s\n---\n\n"
        + pair("a")
    )
    settings = plan_of(guide).settings
    assert settings.collect == ("/tmp/smoke-*.log", "~/ascend/log/**/*.log")
    assert settings.diagnostics == ("npu-smi info", "tail -n 50 /tmp/a.log: x")
    assert settings.diagnostics_timeout_s == 30.0
    assert plan_of(pair("a")).settings.diagnostics_timeout_s is None


def test_front_matter_collect_and_diagnostics_errors_name_their_lines() -> None:
    guide = (
        "---\n"
        "ci:\n"
        '  collect: "/tmp/*.log"\n'
        "  diagnostics:\n"
        "    - npu-smi info\n"
        '    - ""\n'
        "    - 5\n"
        "    - echo card: 0\n"
        "    -\n"
        "    - [a, b]\n"
        "    - yes\n"
        "  diagnostics_timeout: soon\n"
        "---\n\n" + pair("a")
    )
    problems = problems_of(guide)
    assert [(p.line, p.message) for p in problems] == [
        (
            3,
            "front matter ci.collect must be a list of strings, a glob per item; "
            'write it as a list: collect: ["/tmp/*.log"]',
        ),
        (6, "front matter ci.diagnostics: item 2 is empty; give a command or remove the item"),
        (7, 'front matter ci.diagnostics: item 3 reads as the number 5, not a command: quote it, e.g. - "5"'),
        (
            8,
            'front matter ci.diagnostics: item 4 reads as a mapping, not as a command: quote it, e.g. - "echo card: 0"',
        ),
        (9, "front matter ci.diagnostics: item 5 is empty; give a command or remove the item"),
        (10, "front matter ci.diagnostics: item 6 is a nested list; give each command as an item of its own"),
        (11, "front matter ci.diagnostics: item 7 reads as true (YAML's yes/no/on/off/true/false): quote it"),
        (
            12,
            "front matter ci.diagnostics_timeout: bad duration 'soon': use seconds (90) or a unit: 30s, 10m, 3h",
        ),
    ]


def test_front_matter_cleanup_is_read_and_its_errors_name_their_lines() -> None:
    guide = '---\nci:\n  cleanup: ["rm -rf /tmp/smoke-work", "rm -f ~/.cache/x: y"]\n  cleanup_timeout: 10s\n---\n\n'
    settings = plan_of(guide + pair("a")).settings
    assert (settings.cleanup, settings.cleanup_timeout_s) == (("rm -rf /tmp/smoke-work", "rm -f ~/.cache/x: y"), 10.0)
    assert (plan_of(pair("a")).settings.cleanup, plan_of(pair("a")).settings.cleanup_timeout_s) == ((), None)
    bad = "---\nci:\n  cleanup: rm -rf /tmp/smoke-work\n  cleanup_timeout: soon\n  clean_up: [x]\n---\n\n"
    assert [(p.line, p.message) for p in problems_of(bad + pair("a"))] == [
        (
            3,
            "front matter ci.cleanup must be a list of strings, a command per item; "
            'write it as a list: cleanup: ["rm -rf /tmp/smoke-work"]',
        ),
        (4, "front matter ci.cleanup_timeout: bad duration 'soon': use seconds (90) or a unit: 30s, 10m, 3h"),
        (
            5,
            "front matter: unknown key ci.clean_up; did you mean ci.cleanup? allowed: cleanup, cleanup_timeout,"
            " collect, diagnostics, diagnostics_timeout, dialect, env, error_markers, retry, retry_delay, timeout,"
            " timeout_rules, upstream",
        ),
    ]


def test_front_matter_collect_must_be_a_list() -> None:
    guide = "---\nci:\n  collect: {logs: /tmp}\n---\n\n" + pair("a")
    (problem,) = problems_of(guide)
    assert problem.line == 3
    assert problem.message == (
        "front matter ci.collect must be a list of strings, a glob per item; "
        'e.g. collect: ["/tmp/server-*.log", "~/app/log/*.txt"]'
    )


def test_front_matter_env_that_no_environment_can_hold_is_a_document_error_on_its_line() -> None:
    guide = '---\nci:\n  env:\n    GOOD: "1"\n    "A=B": "2"\n    "": x\n    NULLED: "a\\0b"\n---\n\n' + pair("a")
    with pytest.raises(DocumentError) as raised:
        plan_of(guide)
    found = [(p.line, p.message) for p in raised.value.problems]
    assert [line for line, _ in found] == [5, 6, 7]
    assert "'A=B' contains '='" in found[0][1]
    assert "empty name" in found[1][1]
    assert "value of NULLED contains a NUL character" in found[2][1]


def test_front_matter_alias_under_ci_is_a_document_error_and_elsewhere_is_left_alone() -> None:
    elsewhere = "---\ntitle: &name Guide\nheading: *name\nci:\n  timeout: 90\n---\n\n" + pair("a")
    assert plan_of(elsewhere).settings.timeout_s == 90.0
    under_ci = '---\nshared: &limit 90\nci:\n  env:\n    A: "1"\n  timeout: *limit\n---\n\n' + pair("a")
    assert [(p.line, p.message) for p in problems_of(under_ci)] == [
        (6, "front matter: YAML aliases (*name) are not allowed under ci: write the value out in full")
    ]


def test_absurd_durations_are_document_errors_on_their_lines() -> None:
    """400 digits became Infinity in results.json, which is not JSON; the limit is 7 days, and 168h is allowed."""
    guide = "---\nci:\n  timeout: 8d\n---\n\n" + pair("a", test_params=f" timeout='{'9' * 400}'")
    found = [(p.line, p.message) for p in problems_of(guide)]
    assert [line for line, _ in found] == [3, 6]
    assert found[0][1] == "front matter ci.timeout: duration '8d' is over the maximum of 7 days: give at most 168h"
    assert (
        found[1][1]
        == "timeout: duration '99999999999999999...99999999999999999' is over the maximum of 7 days: give at most 168h"
    )
    assert plan_of("# T\n\n" + pair("a", test_params=" timeout='168h'")).steps[0].timeout_s == 7 * 24 * 3600


def test_authoring_md_lists_the_front_matter_keys_the_harness_allows() -> None:
    """The troubleshooting row of an unknown ci key (docs/authoring.md) names exactly what the error allows."""
    said = problems_of("---\nci:\n  timout: 3\n---\n\n" + pair("a"))[0].message
    allowed = said.split("allowed: ", 1)[1]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "authoring.md").read_text(encoding="utf-8")
    (row,) = [line for line in docs.splitlines() if line.startswith("| `front matter: unknown key ci.timout")]
    assert f"| use {allowed} |" in row, row
