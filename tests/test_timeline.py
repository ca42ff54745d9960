"""The run's timeline: each block's start in results.json, the step summary's Mermaid chart and the PNG command."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci.guide.model import Status
from ci.record import read_record
from ci.report.summary import SUMMARY_LIMIT_BYTES, fit_summary
from ci.report.timeline import STATUS_COLOURS, Bar, Timeline, timeline_of_record
from ci.report.timeline.gantt import MAX_GANTT_BARS, gantt_chart
from ci.report.timeline.png import chart_rows

FENCE = "```"
STAMP = r"2000-01-01 \d\d:\d\d:\d\d\.\d{3}"
# a bar as Mermaid must read it: the ordinal, the label, a name of plain signs, one tag, a start and an end
TASK = re.compile(rf"    (\d+)\. (test|test-setup) ([\w .+/()=@!?~-]+?) :(done|crit), ({STAMP}), ({STAMP})")
HEADER = [
    "gantt",
    "    dateFormat YYYY-MM-DD HH:mm:ss.SSS",
    "    todayMarker off",
    "    section blocks",
]

THREE = f"""
{FENCE}shell #test-setup store="FIRST"
sleep 0.2; echo one
{FENCE}

{FENCE}shell #test id="second"
sleep 0.1; echo two
{FENCE}

{FENCE}shell #test-result id="second"
three
{FENCE}

{FENCE}shell #test-setup skip='needs an NPU'
npu-smi info
{FENCE}

{FENCE}shell #test-setup id="third"
echo three
{FENCE}
"""


def _charts(summary: str) -> list[list[str]]:
    """The lines of each ```mermaid block of a step summary."""
    return [block.splitlines() for block in re.findall(r"```mermaid\n(.*?)\n```", summary, re.DOTALL)]


def _tasks(chart: list[str]) -> list[re.Match[str]]:
    """Every bar of the chart; any other line must be one of the chart's own header lines."""
    tasks = []
    for line in chart:
        if line.startswith("%%{init: ") or line in HEADER or line.startswith("    axisFormat "):
            continue
        match = TASK.fullmatch(line)
        assert match, f"a line Mermaid would not read as a bar: {line!r}"
        tasks.append(match)
    return tasks


def _three(guide_runner, **options):  # type: ignore[no-untyped-def]
    """A run of THREE: a setup that stores, a mismatch, a skipped setup and a setup that passes."""
    run = guide_runner(THREE, "--keep-going", **options)
    assert run.returncode == 1, run.stdout + run.stderr
    return run


def test_results_json_records_when_each_block_started(guide_runner) -> None:  # type: ignore[no-untyped-def]
    run = _three(guide_runner)
    blocks = {b["ordinal"]: b for b in run.blocks}
    assert run.record["version"] >= 3  # start_s is there since version 3
    assert blocks[3]["status"] == "skipped" and blocks[3]["start_s"] is None  # never started
    started = [blocks[n] for n in (1, 2, 4)]
    assert all(b["start_s"] is not None and b["start_s"] >= 0 for b in started)
    for before, after in itertools.pairwise(started):  # in sequence, with gaps (diagnostics, teardown)
        assert after["start_s"] >= before["start_s"] + before["duration_s"]


def test_an_older_record_without_starts_is_drawn_from_the_durations(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _three(guide_runner)
    record = run.record
    record["version"] = 2
    for block in record["blocks"]:
        del block["start_s"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(record), encoding="utf-8")
    (guide,) = read_record(older).guides
    timeline = timeline_of_record(guide)
    assert timeline.estimated
    assert [bar.ordinal for bar in timeline.bars] == [1, 2, 4]
    assert timeline.bars[0].start_s == 0.0
    assert [bar.start_s for bar in timeline.bars[1:]] == [bar.end_s for bar in timeline.bars[:-1]]
    assert timeline.not_drawn == ((Status.SKIPPED, 1),)


def test_the_step_summary_draws_one_bar_per_block_that_ran(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    summary = tmp_path / "summary.md"
    _three(guide_runner, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text(encoding="utf-8")
    (chart,) = _charts(text)
    tasks = _tasks(chart)
    assert [(t[1], t[2], t[3].strip(), t[4]) for t in tasks] == [
        ("1", "test-setup", "FIRST", "done"),
        ("2", "test", "second", "crit"),  # a mismatch
        ("4", "test-setup", "third", "done"),
    ]
    starts = [t[5] for t in tasks]
    assert starts == sorted(starts) and all(t[5] < t[6] for t in tasks)
    assert "red (crit) failed, mismatch, timed_out or error" in text
    assert "Not drawn (never started): 1 skipped." in text
    assert "two" not in "\n".join(chart)  # a block's output never goes in the chart


HOSTILE = {
    "colon": "a:b",
    "hash": "#x;y",
    "percent": "%%{init: {'theme': 'dark'}}%%",
    "keyword": "section evil",
    "quotes": "say \"hi\" 'there'",
    "markup": "<b>bold</b> *md* [link](http://x) &amp;",
    "fence": "~~~",
    "bidi": "safe\u202eevil",
}


def test_no_block_name_can_break_the_chart(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocks = []
    for kind, name in HOSTILE.items():
        quote = "'" if '"' in name else '"'
        blocks.append(f"{FENCE}shell #test-setup id={quote}{name}{quote}\necho {kind}\n{FENCE}\n")
    summary = tmp_path / "summary.md"
    run = guide_runner("\n".join(blocks), env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert run.returncode == 0, run.stdout + run.stderr
    (chart,) = _charts(summary.read_text(encoding="utf-8"))
    names = [task[3].strip() for task in _tasks(chart)]
    assert names == [
        "a_b",
        "_x_y",
        "___init_ __theme__ _dark_____",
        "section evil",
        "say _hi_ _there_",
        "_b_bold_/b_ _md_ _link_(http_//x) _amp_",
        "~~~",
        "safe_evil",
    ]


def _bar(ordinal: int, status: Status, start_s: float, duration_s: float) -> Bar:
    return Bar(ordinal, "#test", f"b{ordinal}", status, start_s, duration_s, None, None)


def test_a_block_of_under_a_millisecond_still_gets_a_bar_of_its_own() -> None:
    timeline = Timeline("g.md", (_bar(1, Status.PASSED, 0.0, 0.0), _bar(2, Status.FAILED, 0.0004, 0.25)), ())
    tasks = _tasks(_charts(gantt_chart(timeline))[0])
    assert [(t[5], t[6]) for t in tasks] == [
        ("2000-01-01 00:00:00.000", "2000-01-01 00:00:00.001"),
        ("2000-01-01 00:00:00.000", "2000-01-01 00:00:00.250"),
    ]


def test_a_chart_of_hundreds_of_blocks_is_bounded_and_keeps_every_failure() -> None:
    bars = tuple(
        _bar(n, Status.MISMATCH if n in (7, 399) else Status.PASSED, float(n), 1.0 + (n % 10)) for n in range(1, 401)
    )
    chart = gantt_chart(Timeline("g.md", bars, ((Status.NOT_RUN, 3),)))
    tasks = _tasks(_charts(chart)[0])
    assert len(tasks) == MAX_GANTT_BARS
    ordinals = [int(t[1]) for t in tasks]
    assert ordinals == sorted(ordinals) and {7, 399} <= set(ordinals)
    assert all(int(t[1]) in (7, 399) or (int(t[1]) % 10) >= 7 for t in tasks)  # then the longest
    assert f"Shown: {MAX_GANTT_BARS} of 400 blocks that ran" in chart
    assert "Not drawn (never started): 3 not_run." in chart
    assert len(chart.encode()) < 20_000


def test_the_png_rows_are_one_bar_per_block_coloured_by_status_on_the_run_clock() -> None:
    first = Timeline("a/first.md", (_bar(1, Status.PASSED, 0.5, 2.0), _bar(2, Status.TIMED_OUT, 3.0, 4.0)), ())
    second = Timeline("second.md", (_bar(1, Status.ERROR, 0.25, 0.0),), ((Status.NOT_RUN, 2),))
    rows = chart_rows([first, second])
    assert [row.label for row in rows] == ["first.md: 1. #test b1", "first.md: 2. #test b2", "second.md: 1. #test b1"]
    assert [row.start_s for row in rows] == [0.5, 3.0, 7.25]  # the second guide starts where the first ended
    assert [row.colour for row in rows] == [
        STATUS_COLOURS[Status.PASSED],
        STATUS_COLOURS[Status.TIMED_OUT],
        STATUS_COLOURS[Status.ERROR],
    ]
    assert [row.label for row in chart_rows([first])] == ["1. #test b1", "2. #test b2"]


def _timeline_command(*args: str | Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nimport runpy, sys\nrunpy.run_module('ci.report.timeline', run_name='__main__', alter_sys=True)"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_timeline_command_draws_a_png(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _three(guide_runner)
    out = tmp_path / "timeline.png"
    done = _timeline_command(run.output_dir / "results.json", "-o", out, "--dpi", "20")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}: the timeline of 3 blocks from {run.output_dir / 'results.json'}\n"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    height, width, _ = imread(out).shape
    assert width == 12 * 20 and height > 0
    # the output directory is enough, and the PNG goes beside its record by default
    assert _timeline_command(run.output_dir, "--dpi", "20").returncode == 0
    assert (run.output_dir / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BLOCK_MATPLOTLIB = """
import sys
class NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'matplotlib':
            raise ImportError(f'No module named {name!r}')
        return None
sys.meta_path.insert(0, NoMatplotlib())
"""


def test_without_matplotlib_the_command_names_the_extra_to_install(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _three(guide_runner)
    out = tmp_path / "timeline.png"
    done = _timeline_command(run.output_dir / "results.json", "-o", out, prelude=BLOCK_MATPLOTLIB)
    assert done.returncode == 2
    assert done.stderr.startswith("[ERROR] drawing a timeline needs matplotlib")
    assert "pip install 'guide-guard[timeline]'" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("# a guide, not a record\n", "is not valid JSON (line 1)"),
        ('{"version": 99, "blocks": []}', "is a run record of version 99, and this guide-guard reads versions 1, 2"),
        ('{"blocks": []}', "is not a guide-guard run record: no 'version' number"),
        (None, "does not exist"),
    ],
    ids=["not-json", "newer-version", "no-version", "missing"],
)
def test_a_bad_record_is_named_with_what_is_wrong(tmp_path: Path, content: str | None, said: str) -> None:
    record = tmp_path / "results.json"
    if content is not None:
        record.write_text(content, encoding="utf-8")
    out = tmp_path / "timeline.png"
    done = _timeline_command(record, "-o", out)
    assert done.returncode == 2
    assert done.stderr.startswith(f"[ERROR] {record} ") and said in done.stderr, done.stderr
    assert not out.exists()


def test_a_summary_cut_at_its_limit_leaves_no_chart_cut_short() -> None:
    bars = tuple(_bar(n, Status.PASSED, float(n), 1.0) for n in range(1, 11))
    chart = gantt_chart(Timeline("g.md", bars, ()))
    row = "| 1 | `#test x` | passed |\n"
    table = row * ((SUMMARY_LIMIT_BYTES - 600) // len(row))  # the cut falls inside the chart under it
    cut = fit_summary(f"### g.md\n\n{table}\n{chart}\nmore\n", "results.json")
    assert len(cut.encode()) < SUMMARY_LIMIT_BYTES
    assert "```mermaid" not in cut and "gantt" not in cut
    assert cut.endswith("| passed |\n\n\n(summary cut to stay under the 1 MiB limit; see results.json)\n")
    whole = fit_summary(f"### g.md\n\n{table[: len(table) // 2]}\n{chart}\n", "results.json")
    assert _charts(whole) and len(_tasks(_charts(whole)[0])) == 10
