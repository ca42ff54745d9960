"""The guide registry (guides.yaml) and `python -m ci.registry`: its checks, the matrix, the board and the badges."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ci.github.registry import MATRIX_KEYS, load_registry
from ci.registry import main
from ci.run import build_parser as build_run_parser

ROOT = Path(__file__).resolve().parents[1]
SHA = "0123456789abcdef0123456789abcdef01234567"


def echo_test(test_id: str, expected: str) -> str:
    """A #test that echoes its id, and its #test-result expecting EXPECTED."""
    return (
        f'```shell #test id="{test_id}"\necho {test_id}\n```\n\n```shell #test-result id="{test_id}"\n{expected}\n```\n'
    )


PASSING = "\n" + echo_test("hello", "hello")
FAILING = "\n" + echo_test("hello", "goodbye") + "\n" + echo_test("after", "after")


# blocks of at most 2 minutes: a job of 60 minutes leaves them room
OK_GUIDE = "---\nci:\n  timeout: 2m\n---\n" + PASSING


def write_registry(directory: Path, text: str, guides: dict[str, str] | None = None) -> Path:
    """guides.yaml (dedented) in DIRECTORY, with the guides it names written beside it."""
    for name, body in (guides or {"docs/ok.md": OK_GUIDE}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    path = directory / "guides.yaml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def errors(err: str) -> list[str]:
    return [line.removeprefix("[ERROR] ") for line in err.splitlines() if line.startswith("[ERROR] ")]


# ---------------------------------------------------------------------------------------------------------
# --check


def test_the_repositorys_registry_is_valid() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ci.registry", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("guides.yaml: 2 entries, every guide parses (nightly: 1, weekly: 1)")
    # docs/specforge.md and the demo are its first two entries; the demo needs no container
    entries = load_registry(ROOT / "guides.yaml").entries
    assert [(e.name, e.guide) for e in entries[:2]] == [
        ("specforge-npu", "docs/specforge.md"),
        ("demo", "docs/examples/demo.md"),
    ]
    assert entries[1].image == "" and entries[1].runner == ("ubuntu-latest",)


def test_unknown_keys_are_named_with_the_key_they_may_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults:
          runner: [ubuntu-latest]
          timout_minutes: 60
        guides:
          - name: ok
            guide: docs/ok.md
            shedule: weekly
            upstream: {repo: o/r, signal: [release]}
        gudes: []
        """,
    )
    status, out, err = run(capsys, str(registry), "--check")
    assert (status, out) == (2, "")
    found = errors(err)
    assert found[:4] == [
        f"{registry}:3: unknown key 'timout_minutes' in defaults; did you mean timeout_minutes? (allowed: runner,"
        " image, container_options, timeout_minutes, schedule, monitor, upstream, set, only, variables, secrets,"
        " dialect, timeout_rules)",
        f"{registry}:7: unknown key 'shedule' in entry 'ok'; did you mean schedule? (allowed: name, guide, runner,"
        " image, container_options, timeout_minutes, schedule, monitor, upstream, set, only, variables, secrets,"
        " dialect, timeout_rules)",
        f"{registry}:8: unknown key 'signal' in entry 'ok''s upstream; did you mean signals? (allowed: repo,"
        " branch, ref, model, model_revision, signals)",
        f"{registry}:9: unknown key 'gudes' in the registry; did you mean guides? (allowed: defaults, guides)",
    ]
    assert found[-1] == "4 problems in the registry: fix them and run --check again"


def test_missing_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        guides:
          - name: first
            guide: docs/ok.md
          - guide: docs/ok.md
            runner: [ubuntu-latest]
          - just a word
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[:-1] == [
        f"{registry}:2: entry 'first': runner is missing; give it in the entry or in defaults,"
        " e.g. runner: [ubuntu-latest]",
        f"{registry}:4: the entry at line 4: name is missing; every entry names its own, e.g. name: my-guide",
        f"{registry}:6: each item of guides must be a mapping with a name and a guide, not str 'just a word'",
    ]


def test_a_name_taken_twice_names_both_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - {name: first, guide: docs/ok.md}
          - {name: second, guide: docs/ok.md}
          - {name: first, guide: docs/ok.md}
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[0] == (
        f"{registry}:5: entry 'first': the name is taken by the entry at line 3; give each entry its own name"
    )


def test_a_guide_that_does_not_parse_is_shown_at_both_files_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - name: broken
            guide: docs/broken.md
          - name: missing
            guide: docs/nowhere.md
        """,
        {"docs/broken.md": '# Broken\n\n```shell #test id="a"\necho a\n```\n'},
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    found = errors(err)
    assert found[0].startswith(f"{registry}:4: entry 'broken': the guide does not parse: docs/broken.md:3: ")
    assert "#test-result" in found[0]
    assert found[1].startswith(f"{registry}:6: entry 'missing': cannot read the guide docs/nowhere.md (in {tmp_path})")


def test_a_secret_name_is_refused_at_its_own_line_after_an_item_that_is_no_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(
        tmp_path,
        """
        guides:
          - name: bad
            guide: docs/ok.md
            runner: [ubuntu-latest]
            secrets:
              - ""
              - HF_TOKEN
              - private-index
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[:2] == [
        f"{registry}:6: entry 'bad': item 1 of secrets must be non-empty text, not str ''",
        f"{registry}:8: entry 'bad': secret 'private-index' is not a variable name: letters, digits and underscores,"
        " not starting with a digit (secrets lists names, e.g. [HF_TOKEN, MODELSCOPE_API_TOKEN])",
    ]


@pytest.mark.parametrize(
    "text,line,said",
    [
        (
            "guides:\n  - &e {name: a, guide: docs/ok.md, runner: [x]}\n  - *e\n",
            3,
            "YAML aliases (*name) are not allowed",
        ),
        ("guides:\n  - name: a\n    name: b\n", 3, "the key 'name' is given twice in one mapping (first at line 2)"),
        ("guides:\n  - name: [a\n", 3, "not valid YAML"),
        ("- just a list\n", 1, "the registry needs a list `guides:` of entries"),
        # PyYAML reads an unquoted date as one, and cannot build an impossible one
        (
            "guides:\n  - name: a\n    upstream: {ref: 2001-13-45}\n",
            3,
            "'2001-13-45' looks like a date but is none (month must be in 1..12): quote it to keep it as text",
        ),
        ("guides:\n  - name: a\n    2001-02-30: x\n", 3, "'2001-02-30' looks like a date but is none"),
        ("guides:\n  - name: a\n    set: {n: !!int x}\n", 3, "'x' is no !!int"),
    ],
)
def test_yaml_that_cannot_be_read_is_refused_at_its_line(
    text: str, line: int, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = tmp_path / "guides.yaml"
    registry.write_text(text, encoding="utf-8")
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[0].startswith(f"{registry}:{line}: {said}"), err


def test_values_are_checked_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - name: bad name
            guide: docs/ok.md
          - name: values
            guide: docs/ok.md
            timeout_minutes: 15
            schedule: hourly
            monitor: maybe
            variables: lower
            set: {a: [1, 2]}
            runner: []
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    found = errors(err)
    assert f"{registry}:3: entry 'bad name': name 'bad name' must be letters, digits and dashes (at most 80)" in found
    assert any(
        f"{registry}:7: entry 'values': timeout_minutes must be a whole number of minutes, at least 16" in p
        for p in found
    )
    assert f"{registry}:8: entry 'values': schedule must be one of nightly, weekly, not str 'hourly'" in found
    assert f"{registry}:9: entry 'values': monitor must be true or false, not str 'maybe'" in found
    assert any(p.startswith(f"{registry}:10: entry 'values': variables 'lower' must be a prefix") for p in found)
    assert any(p.startswith(f"{registry}:11: entry 'values': set 'a' must be a NAME") for p in found)
    assert f"{registry}:12: entry 'values': runner needs at least one label, e.g. [ubuntu-latest]" in found


def test_secret_names_are_variable_names_github_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest], secrets: [HF_TOKEN]}
        guides:
          - name: good
            guide: docs/ok.md
          - name: bad
            guide: docs/ok.md
            secrets:
              - MODELSCOPE_API_TOKEN
              - GITHUB_TOKEN
              - private-index
              - ld_preload
          - name: mapping
            guide: docs/ok.md
            secrets: {A_TOKEN: x}
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    example = "(secrets lists names, e.g. [HF_TOKEN, MODELSCOPE_API_TOKEN])"
    assert errors(err)[:4] == [
        f"{registry}:9: entry 'bad': secret 'GITHUB_TOKEN': GitHub reserves GITHUB_ names (no secret can have one);"
        f" name the secret otherwise {example}",
        f"{registry}:10: entry 'bad': secret 'private-index' is not a variable name: letters, digits and underscores,"
        f" not starting with a digit {example}",
        f"{registry}:11: entry 'bad': secret 'ld_preload' would set ld_preload for every later step of the job, and"
        " no secret may be named LD_* (what the dynamic loader and the C library load, how they behave, which locale"
        " and time zone they use: docs/ci.md lists the rules); store the secret under a name of its own,"
        " e.g. GUIDE_ld_preload, name that, and set ld_preload from it in the block that needs it"
        f' (`export ld_preload="$GUIDE_ld_preload"`) {example}',
        f"{registry}:14: entry 'mapping': secrets must be a list of text, not a mapping",
    ]
    # a default applies to the entries that name none, as every default does
    registry.write_text(registry.read_text().split("  - name: bad")[0], encoding="utf-8")
    status, out, _ = run(capsys, str(registry), "--matrix")
    assert status == 0 and [row["secrets"] for row in json.loads(out)["include"]] == ["HF_TOKEN"]


def test_the_job_must_leave_the_guide_its_longest_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - name: tight
            guide: docs/ok.md
            timeout_minutes: 60
            only: [hello, nothing]
        """,
        {"docs/ok.md": "---\nci:\n  timeout: 1h\n---\n" + PASSING},
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[:2] == [
        f"{registry}:5: entry 'tight': timeout_minutes 60 gives the run a deadline of 45 min, and block hello"
        " (docs/ok.md:6) may take 60 min: give timeout_minutes at least 105 (30 min for the rest of the guide,"
        " 15 for the job around the harness)",
        f"{registry}:6: entry 'tight': only: 'nothing' names no block; use an id, a store name or an ordinal"
        " (see --list)",
    ]


def fences_registry(directory: Path, guide: str, timeout_minutes: int, rules: str) -> Path:
    """guides.yaml with one entry, upstream: GUIDE read as plain fences, a job of TIMEOUT_MINUTES, its timeout RULES."""
    return write_registry(
        directory,
        f"""
        defaults: {{runner: [ubuntu-latest]}}
        guides:
          - name: upstream
            guide: docs/upstream.md
            timeout_minutes: {timeout_minutes}
            dialect: fences
            timeout_rules: {rules}
        """,
        {"docs/upstream.md": guide},
    )


def test_a_skipped_blocks_limit_asks_nothing_of_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an upstream guide read as plain fences: its rule limits the fence that runs; the ```shell skip fence,
    # never run, keeps the dialect's default limit of 3 h, which a 60-minute job could not hold
    upstream = "```shell\necho ready\n```\n\n```shell skip\nnpu-smi info\n```\n"
    registry = fences_registry(tmp_path, upstream, 60, "[{contains: echo, timeout: 2m}]")
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 0, err
    # the fence that runs still counts: a limit the job cannot hold is refused
    registry.write_text(registry.read_text().replace("timeout: 2m", "timeout: 1h"), encoding="utf-8")
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert "block #1 (docs/upstream.md:1) may take 60 min: give timeout_minutes at least 105" in err, err


def test_the_matrix_passes_each_rules_limit_exactly_and_a_rule_of_two_lines_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = '[{contains: "cmake --build", timeout: 100000.5}, {contains: echo, timeout: 0.25}]'
    registry = fences_registry(tmp_path, "```shell\necho ready\n```\n", 2000, rules)
    status, out, err = run(capsys, str(registry), "--matrix")
    assert status == 0, err
    [row] = json.loads(out)["include"]
    # what the workflow hands ci.run as --timeout-rule, one per line, read back as the registry gave them
    rules = [
        build_run_parser().parse_args(["g.md", "--timeout-rule", line]).timeout_rules[0]
        for line in row["timeout-rules"].split("\n")
    ]
    assert [(rule.contains, rule.timeout_s) for rule in rules] == [("cmake --build", 100000.5), ("echo", 0.25)]
    # a rule's text on two lines would reach ci.run as two rules: refused where it is written
    registry.write_text(registry.read_text().replace('"cmake --build"', '"cmake\\n--build"'), encoding="utf-8")
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert "contains must be one line" in err and "guides.yaml:" in err, err


def test_a_set_value_on_two_lines_is_refused_where_it_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - name: values
            guide: docs/ok.md
            set:
              model_dir: /data/m
              note: "first\\nsecond"
              other: "a\\rb"
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    # the matrix hands set on one NAME=VALUE per line: `second` would reach ci.run as a --set of its own
    assert errors(err)[:2] == [
        f"{registry}:7: entry 'values': set 'note' must be one line: the values reach ci.run one per line, so a"
        " line break would split it in two; write it on one line (a block can add the line breaks it needs)",
        f"{registry}:8: entry 'values': set 'other' must be one line: the values reach ci.run one per line, so a"
        " line break would split it in two; write it on one line (a block can add the line breaks it needs)",
    ], err


def test_guides_named_by_url_are_https_and_pinned_and_not_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(
        tmp_path,
        f"""
        defaults: {{runner: [ubuntu-latest]}}
        guides:
          - {{name: plain-http, guide: "http://guides.invalid/o/r/{SHA}/g.md"}}
          - {{name: a-branch, guide: "https://guides.invalid/o/r/main/g.md"}}
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    assert errors(err)[:2] == [
        f"{registry}:3: entry 'plain-http': the guide http://guides.invalid/o/r/{SHA}/g.md must be an https URL:"
        " plain http can be altered on the way",
        f"{registry}:4: entry 'a-branch': the guide https://guides.invalid/o/r/main/g.md is not pinned to a commit:"
        " name the full commit sha in the URL, e.g. https://raw.githubusercontent.com/OWNER/REPO/<40-hex sha>/"
        "docs/guide.md (a branch or tag can move)",
    ]
    # a pinned https URL passes, and the check says it was not fetched (the host does not even exist)
    registry.write_text(
        f'defaults: {{runner: [x]}}\nguides:\n  - {{name: pinned, guide: "https://guides.invalid/o/r/{SHA}/g.md"}}\n'
    )
    status, out, err = run(capsys, str(registry), "--check")
    assert status == 0, err
    assert "not fetched: pinned (named by URL; checked for https and a pinned commit only" in out


def test_the_signals_asked_for_must_have_what_they_watch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(
        tmp_path,
        """
        defaults: {runner: [ubuntu-latest]}
        guides:
          - name: watching
            guide: docs/ok.md
            upstream:
              signals: [release, guide, model, relase]
          - name: both
            guide: docs/ok.md
            upstream: {repo: o/r, branch: main, signals: [release, branch]}
        """,
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert status == 2
    found = errors(err)
    assert any("unknown key 'relase' in entry 'watching''s upstream signals; did you mean release?" in p for p in found)
    assert (
        f"{registry}:9: entry 'both': watch either the latest release (release) or a branch head (branch), not both"
        in found
    )
    # a signal whose source neither the entry nor the guide's front matter names
    registry.write_text(
        "defaults: {runner: [x]}\nguides:\n  - name: w\n    guide: docs/ok.md\n    upstream:\n"
        "      signals: [release, model]\n"
    )
    status, _, err = run(capsys, str(registry), "--check")
    assert errors(err)[:2] == [
        f"{registry}:5: entry 'w': the signal release needs a repo (upstream.repo, or ci.upstream.repo in the guide)",
        f"{registry}:5: entry 'w': the signal model needs a model (upstream.model, or ci.upstream.model in the guide)",
    ]


# ---------------------------------------------------------------------------------------------------------
# --matrix

MATRIX_REGISTRY = """
defaults:
  runner: [ubuntu-latest]
  timeout_minutes: 60
guides:
  - name: night
    guide: docs/ok.md
    runner: [self-hosted, npu]
    image: registry.example/image:1
    container_options: --shm-size 16g
    variables: NIGHT
    secrets: [HF_TOKEN, MODELSCOPE_API_TOKEN]
    set: {model_dir: /data/m, fast: true}
    only: [hello]
    upstream: {repo: o/r, ref: main, model: org/m, signals: [release, guide, model]}
  - name: week
    guide: docs/ok.md
    schedule: weekly
    monitor: false
"""


def test_the_matrix_of_each_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(tmp_path, MATRIX_REGISTRY)
    status, out, _ = run(capsys, str(registry), "--matrix", "--group", "nightly")
    assert status == 0
    matrix = json.loads(out)
    assert list(matrix) == ["include"]
    [night] = matrix["include"]
    assert tuple(night) == MATRIX_KEYS
    assert night == {
        "name": "night",
        "guide": "docs/ok.md",
        "runner-labels": '["self-hosted", "npu"]',
        "image": "registry.example/image:1",
        "container-options": "--shm-size 16g",
        "timeout-minutes": 60,
        "monitor": True,
        "upstream-ref": "main",
        "upstream-repo": "o/r",
        "upstream-branch": "",
        "upstream-model": "org/m",
        "upstream-model-revision": "",
        "monitor-signals": "release,guide,model",
        "set": "model_dir=/data/m\nfast=true",
        "only": "hello",
        "variables": "NIGHT",
        "secrets": "HF_TOKEN MODELSCOPE_API_TOKEN",
        "dialect": "labels",
        "timeout-rules": "",
    }
    _, out, _ = run(capsys, str(registry), "--matrix", "--group", "weekly")
    [week] = json.loads(out)["include"]
    assert (week["name"], week["runner-labels"], week["image"], week["monitor"]) == (
        "week",
        '["ubuntu-latest"]',
        "",
        False,
    )
    # every entry, or the one named, whatever its group
    _, out, _ = run(capsys, str(registry), "--matrix")
    assert [row["name"] for row in json.loads(out)["include"]] == ["night", "week"]
    _, out, _ = run(capsys, str(registry), "--matrix", "--entry", "week")
    assert [row["name"] for row in json.loads(out)["include"]] == ["week"]


def test_the_matrix_refuses_an_unknown_entry_and_an_invalid_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(tmp_path, MATRIX_REGISTRY)
    status, out, err = run(capsys, str(registry), "--matrix", "--entry", "nigth")
    assert (status, out) == (2, "")
    assert errors(err) == [f"{registry} has no entry nigth (entries: night, week)"]
    registry.write_text(registry.read_text().replace("schedule: weekly", "schedule: monthly"))
    status, out, err = run(capsys, str(registry), "--matrix")
    assert (status, out) == (2, "") and "schedule must be one of nightly, weekly" in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(tmp_path, MATRIX_REGISTRY)
    assert run(capsys, str(registry), "--check", "--group", "weekly")[0] == 2
    with pytest.raises(SystemExit):
        main([str(registry), "--matrix", "--group", "monthly"])
    capsys.readouterr()
    status, _, err = run(capsys, str(tmp_path / "nowhere.yaml"), "--check")
    assert status == 2 and f"{tmp_path / 'nowhere.yaml'}: cannot read the registry" in err


# ---------------------------------------------------------------------------------------------------------
# --board


def two_runs(guide_runner: Any, tmp_path: Path) -> tuple[Path, Path]:
    """The output directories of a real passing and a real failing run of the harness."""
    passed = guide_runner(PASSING, name="quick-start.md")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    shutil.move(passed.output_dir, tmp_path / "passed")
    failed = guide_runner(FAILING, name="install.md")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    shutil.move(failed.output_dir, tmp_path / "failed")
    return tmp_path / "passed", tmp_path / "failed"


@pytest.fixture
def runs(guide_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """two_runs, with the test in a directory with no guides.yaml: the board has the runs' guides only."""
    monkeypatch.chdir(tmp_path)
    return two_runs(guide_runner, tmp_path)


def test_the_board_renders_real_runs_failing_first(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passed, failed = runs
    board = tmp_path / "board"
    status, out, err = run(capsys, "--board", str(passed), str(failed), "--output", str(board))
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "## Guides: 1 failing, 1 passing"
    assert lines[2:4] == [
        "| guide | verdict | upstream ref | last passed | took | run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    install, quick_start = lines[4], lines[5]
    assert install.startswith("| install | ❌ failed (1 mismatch, 1 not run) | — | — | ")
    assert quick_start.startswith("| quick-start | ✅ passed (1 passed) | — | 20")
    assert (board / "board.md").read_text(encoding="utf-8") == out
    record = json.loads((failed / "results.json").read_text(encoding="utf-8"))["guides"][0]
    status_file = json.loads((board / "install.json").read_text(encoding="utf-8"))
    assert status_file == {
        "name": "install",
        "guide": record["guide"],
        "verdict": "failed",
        "ref": None,
        "date": record["started_at"],
        "duration_s": record["duration_s"],
        "last_passed": None,
        "run_url": None,
        "counts": {"mismatch": 1, "not_run": 1},
    }


def test_each_guide_gets_a_badge_in_shields_endpoint_format(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passed, failed = runs
    board = tmp_path / "board"
    assert run(capsys, "--board", str(passed), str(failed), "--output", str(board))[0] == 0
    badges = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in board.glob("*.badge.json")}
    assert badges == {
        "install.badge.json": {"schemaVersion": 1, "label": "install", "message": "failed", "color": "red"},
        "quick-start.badge.json": {
            "schemaVersion": 1,
            "label": "quick-start",
            "message": "passed",
            "color": "brightgreen",
        },
    }


def test_the_previous_board_keeps_last_passed_and_the_guides_not_run(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workflow's way: status files of this run on top of the previous board's files."""
    passed, _ = runs
    board = tmp_path / "board"
    assert run(capsys, "--board", str(passed), "--output", str(board))[0] == 0
    first = json.loads((board / "quick-start.json").read_text(encoding="utf-8"))
    assert first["last_passed"] == first["date"]
    tonight = tmp_path / "tonight"
    tonight.mkdir()
    failing = {
        "name": "quick-start",
        "guide": first["guide"],
        "verdict": "failed",
        "ref": "v2",
        "date": "2099-01-01T02:00:00Z",
    }
    (tonight / "quick-start.json").write_text(json.dumps(failing))
    skipped = {"name": "other", "guide": "docs/other.md", "verdict": "not_run", "date": "2099-01-01T02:00:00Z"}
    (tonight / "other.json").write_text(json.dumps(skipped))
    status, out, _ = run(capsys, "--board", str(tonight), "--previous", str(board), "--output", str(board))
    assert status == 0
    now = json.loads((board / "quick-start.json").read_text(encoding="utf-8"))
    assert (now["verdict"], now["ref"], now["last_passed"]) == ("failed", "v2", first["date"])
    assert f"| quick-start | ❌ failed | v2 | {first['date'][:10]} | — | 2099-01-01 |" in out
    # a guide the monitor skipped keeps its last run's row; with none, it shows as not run
    assert "| other | ⏸️ not run | — | — | — | 2099-01-01 |" in out
    skipped_again = dict(failing, verdict="not_run", date="2099-01-02T02:00:00Z")
    (tonight / "quick-start.json").write_text(json.dumps(skipped_again))
    _, out, _ = run(capsys, "--board", str(tonight), "--previous", str(board))
    assert f"| quick-start | ❌ failed | v2 | {first['date'][:10]} | — | 2099-01-01 |" in out


def test_with_a_registry_the_board_has_a_row_per_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = write_registry(tmp_path, MATRIX_REGISTRY)
    statuses = tmp_path / "statuses"
    statuses.mkdir()
    row = {"name": "week", "guide": "docs/ok.md", "verdict": "passed", "duration_s": 3725, "run_url": "https://x/1"}
    (statuses / "week.json").write_text(json.dumps(row | {"date": "2099-01-01T02:00:00Z"}))
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "gone.json").write_text(json.dumps(row | {"name": "gone"}))  # no longer registered
    status, out, _ = run(capsys, str(registry), "--board", str(statuses), "--previous", str(previous))
    assert status == 0
    assert out.splitlines()[4:] == [
        "| night | ⏸️ not run | — | — | — | — |",
        "| week | ✅ passed | — | 2099-01-01 | 1h 02m | [2099-01-01](https://x/1) |",
    ]


def test_board_inputs_that_cannot_be_read_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no guides.yaml here: the board has the runs' guides only
    status, _, err = run(capsys, "--board", str(tmp_path / "nowhere"))
    assert status == 2 and "nowhere does not exist: give a run's --output-dir, or a directory of status files" in err
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    status, _, err = run(capsys, "--board", str(tmp_path / "bad.json"))
    assert status == 2 and f"{tmp_path / 'bad.json'} is not valid JSON (line 1)" in err
    (tmp_path / "bad.json").write_text('{"name": "x", "verdict": "great"}', encoding="utf-8")
    status, _, err = run(capsys, "--board", str(tmp_path / "bad.json"))
    assert status == 2 and "verdict 'great' is not one of passed, failed, interrupted, no_verdict, not_run" in err


def test_a_status_files_name_never_takes_the_board_outside_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no guides.yaml here: the board has the status files' guides only
    statuses = tmp_path / "statuses"
    statuses.mkdir()
    escape = {"name": "../../escape", "guide": "docs/x.md", "verdict": "passed", "date": "2099-01-01T02:00:00Z"}
    (statuses / "escape.json").write_text(json.dumps(escape), encoding="utf-8")
    board = tmp_path / "a" / "b" / "board"
    status, _, err = run(capsys, "--board", str(statuses), "--output", str(board))
    assert status == 2
    assert errors(err) == [
        f"{statuses / 'escape.json'}: name '../../escape' must be letters, digits and dashes (at most 80),"
        " as a registry entry's"
    ], err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "statuses",
        "statuses/escape.json",
    ]
