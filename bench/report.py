"""Render a benchmark run: the summary table as text, docs/performance.md, and the PNG plots."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common import Section, SummaryRow
from matching import AdversarialRow, ThroughputRow
from overhead import TOOLS, OverheadResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SUMMARY_HEADER = ("benchmark", "measure", "guide-guard", "compared with", "ratio", "target", "verdict")
PLOT_PREFIX = "performance-"


@dataclass
class RunData:
    """Everything one run of bench/run.py measured, for the document and the plots."""

    quick: bool
    command: str  # how the run was started
    machine: list[tuple[str, str]]
    load_at_end: str
    sections: list[Section]
    overhead: OverheadResult | None = None
    throughput: list[ThroughputRow] | None = None
    adversarial: list[AdversarialRow] | None = None
    throughput_regex_timeout_s: float = 0.0
    adversarial_regex_timeout_s: float = 0.0


def summary_rows(sections: Sequence[Section]) -> list[SummaryRow]:
    return [row for section in sections for row in section.summary]


def _cells(row: SummaryRow) -> tuple[str, ...]:
    return (row.benchmark, row.measure, row.ours, row.reference, row.ratio, row.target, row.verdict)


def summary_text(rows: Sequence[SummaryRow]) -> str:
    """The summary as an aligned plain-text table."""
    table = [SUMMARY_HEADER, *(_cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in table) for column in range(len(SUMMARY_HEADER))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def summary_markdown(rows: Sequence[SummaryRow]) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(SUMMARY_HEADER) + " |", "|" + " --- |" * len(SUMMARY_HEADER)]
    for row in rows:
        cells = [escape(cell) or " " for cell in _cells(row)]
        if row.verdict == "MISSED":
            cells[-1] = "**MISSED**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_plots(data: RunData, out_dir: Path) -> tuple[list[Path], str]:
    """Draw the plots that the run has data for; (files written, why none were when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        return [], "matplotlib is not installed (pip install matplotlib): no plots."
    written: list[Path] = []
    if data.overhead is not None and len(data.overhead.medians) >= 2:
        written.append(_save(plot_overhead(data.overhead), out_dir / f"{PLOT_PREFIX}overhead.png"))
    if data.throughput:
        figure = plot_throughput(data.throughput, data.throughput_regex_timeout_s)
        written.append(_save(figure, out_dir / f"{PLOT_PREFIX}matching.png"))
    if data.adversarial:
        figure = plot_adversarial(data.adversarial, data.adversarial_regex_timeout_s)
        written.append(_save(figure, out_dir / f"{PLOT_PREFIX}adversarial.png"))
    return written, ""


def plot_overhead(result: OverheadResult) -> Figure:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    sizes = sorted(result.medians)
    for tool in TOOLS:
        points = [(n, result.medians[n][tool]) for n in sizes if tool in result.medians[n]]
        if points:
            axes.plot(
                [n for n, _ in points],
                [seconds for _, seconds in points],
                marker="o",
                linewidth=2.5 if tool == "ci.run" else 1.2,
                label=tool,
            )
    axes.set(xscale="log", yscale="log", xlabel="trivial #test blocks (N)", ylabel="wall time, s (median)")
    axes.set_title("Overhead: whole command, interpreter start included")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return figure


def plot_throughput(throughput: list[ThroughputRow], timeout_s: float) -> Figure:
    """Two panes (hit, miss): match time against output size, ours solid, the regex dashed."""
    import matplotlib.pyplot as plt

    figure, panes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for pane, case in zip(panes, ("hit", "miss"), strict=True):
        for index, wildcards in enumerate(sorted({row.wildcards for row in throughput})):
            rows = sorted((row for row in throughput if row.wildcards == wildcards), key=lambda row: row.size_mb)
            ours = [(row.size_mb, row.hit_s if case == "hit" else row.miss_s) for row in rows]
            regex = [(row.size_mb, row.regex_hit_s if case == "hit" else row.regex_miss_s) for row in rows]
            color = f"C{index}"
            pane.plot(*zip(*ours, strict=True), marker="o", color=color, label=f"ours, {wildcards} wildcards")
            ran = [(size, seconds) for size, seconds in regex if seconds is not None]
            if ran:
                pane.plot(
                    *zip(*ran, strict=True),
                    marker="s",
                    linestyle="--",
                    color=color,
                    label=f"regex, {wildcards} wildcards",
                )
            cut = [size for size, seconds in regex if seconds is None]
            if cut:
                pane.plot(cut, [timeout_s] * len(cut), marker="^", linestyle="none", color=color)
        pane.set(xscale="log", yscale="log", xlabel="output size, MB")
        pane.set_title("hit: the body matches" if case == "hit" else "miss: a piece is nowhere (full scan)")
        pane.grid(True, which="both", alpha=0.3)
    panes[0].set_ylabel("match time, s")
    panes[0].legend(fontsize=8)
    figure.suptitle("Matching a stdout file: ours (match_file) against the .*? regex (triangles: cut off)")
    return figure


def plot_adversarial(adversarial: list[AdversarialRow], timeout_s: float) -> Figure:
    """Match time against n for each body of the family: ours solid (both forms), the regex dashed."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for index, repeats in enumerate(sorted({row.repeats for row in adversarial})):
        color = f"C{index}"
        for body in dict.fromkeys(row.body for row in adversarial if row.repeats == repeats):
            rows = sorted((row for row in adversarial if row.body == body), key=lambda row: row.n)
            scan = body.endswith("b...")
            axes.plot(
                [row.n for row in rows],
                [row.ours_s for row in rows],
                marker="D" if scan else "o",
                linewidth=2 if scan else 1,
                color=color,
                label=f"ours {body}",
            )
            if scan:
                continue  # its regex curve lies on the other form's
            ran = [(row.n, row.regex_s) for row in rows if row.regex_s is not None]
            if ran:
                axes.plot(
                    [n for n, _ in ran],
                    [seconds for _, seconds in ran],
                    marker="s",
                    linestyle="--",
                    color=color,
                    label=f"regex {body}",
                )
            cut = [row.n for row in rows if row.regex_cut_off]
            if cut:
                axes.plot(cut, [timeout_s] * len(cut), marker="^", markersize=9, linestyle="none", color=color)
    axes.set(xscale="log", yscale="log", xlabel="n (the output is 'a' * n)", ylabel="match time, s")
    axes.set_title("Adversarial family (triangles: regex cut off at the timeout)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


SECTION_NOTES = {
    "Overhead": (
        "`bash` is the floor: one `bash -c` per block from a bash loop, stdout to a new file per block as the "
        "harness does. `baseline` is the reference engine's documented way (`subprocess.run(..., "
        "capture_output=True)` and a `.*?` regex per block): it pipes output instead of creating files, which "
        "is cheaper per block where creating a file is slow (see the machine table). `base+files` is that "
        "baseline keeping each block's stdout and stderr in two new files, as the contract asks of the harness "
        "(pipes would let a background server stall the run): the difference between the two baselines is the "
        "price of the contract's files, the difference between `base+files` and `ci.run` the harness's own. "
        "prysk and byexample run all commands of a file in one long-lived shell: no process, no file and no "
        "isolation per block. Where ci.run's time goes beyond the baseline's: its fixed cost (the `all skipped` "
        "row: importing markdown-it and the harness, parsing and checking the whole guide before the first block, "
        "writing the reports; the baseline reads a JSON list) and, per block, the output files (compare "
        "`base+files`). The harness makes the next block's files and writes the previous block's report while a "
        "block runs, so on two cores most of its own per-block work is off the path the run waits on."
    ),
    "Reference": (
        "R is the reference engine (cosdt-ci-test/workflows), loaded from the checkout given with `--reference` "
        "and run as its projects run it: a unittest test case of its base class calling `run_template()`, "
        "`subprocess.run(..., capture_output=True)` per block, output in memory only. `floor` is one `bash -c` "
        "per block from a bash loop. Per block: the difference between two sizes over the difference in blocks; "
        "start-up: the smallest size's time less its blocks. `--list` reads, checks and plans the guide and "
        "runs nothing: its time should grow linearly with the guide."
    ),
    "Matching": (
        "Ours reads the file in bounded chunks (`ci.expect.match.match_file`), the regex needs the whole output "
        "decoded in memory first (not timed). With one wildcard ours reads only both ends of the file."
    ),
    "Memory": (
        "The baseline keeps the output as bytes and again as text, and `communicate()` joins its chunks: "
        "peak memory grows with the output. It is capped at 1 GiB of output in the full run."
    ),
    "Timeouts": (
        "Gone means every process of the tree has exited (zombies count as gone). The harness sends SIGTERM "
        "to the block's process group at the deadline, waits `--grace`, then SIGKILLs what is left."
    ),
    "Startup": (
        "`precompiled`: the same commands on a copy of `ci/` with its bytecode compiled beforehand. An editable "
        "install under PYTHONDONTWRITEBYTECODE compiles the harness's sources at every start."
    ),
}


def markdown_document(data: RunData, plots: Sequence[Path], plot_note: str) -> str:
    rows = summary_rows(data.sections)
    missed = [row for row in rows if row.verdict == "MISSED"]
    met = [row for row in rows if row.verdict == "met"]
    parts = [
        "# Performance",
        "",
        "<!-- Written by bench/run.py; do not edit by hand: run it again. -->",
        "",
        f"Figures from one run of `{data.command}` on the machine described below. Compared figures come from "
        "the same run, their commands interleaved round by round so that load on this shared machine hits "
        "them alike; times are medians unless a table says otherwise. Targets are those of issue #7; "
        f"{len(met)} met, {len(missed)} missed.",
        "",
    ]
    if data.quick:
        parts += ["**Quick run: tiny sizes, for checking the scripts only; the figures mean nothing.**", ""]
    parts += ["## Summary", "", summary_markdown(rows), "", "## Machine", "", "| | |", "| --- | --- |"]
    parts += [f"| {what} | {value.replace('|', '/')} |" for what, value in data.machine]
    parts += [f"| load at end | {data.load_at_end} |", ""]
    parts += [
        "## How to reproduce",
        "",
        "```",
        "python3 -m venv .venv && .venv/bin/pip install -q -e . matplotlib prysk byexample",
        ".venv/bin/python bench/run.py           # all benchmarks, a few minutes: this file and docs/performance-*.png",
        ".venv/bin/python bench/run.py --reference DIR   # DIR: a checkout of cosdt-ci-test/workflows (mistune)",
        ".venv/bin/python bench/run.py --quick   # tiny sizes, seconds: written to bench/out/",
        "```",
        "",
        "Each benchmark also runs alone (`bench/overhead.py`, `bench/matching.py`, `bench/memory.py`, "
        "`bench/timeouts.py`, `bench/startup.py`, each with `--help`); see [bench/README.md](../bench/README.md). "
        "prysk, byexample and matplotlib are optional: without them their columns say `not installed` and no "
        "plots are drawn. Figures depend on the machine and its load: compare figures of one run.",
        "",
    ]
    plot_names = {path.name for path in plots}
    section_plots = {
        "Overhead": [f"{PLOT_PREFIX}overhead.png"],
        "Matching": [f"{PLOT_PREFIX}matching.png", f"{PLOT_PREFIX}adversarial.png"],
    }
    for section in data.sections:
        parts += [f"## {section.title}", "", "```", *section.lines, "```", ""]
        for name in section_plots.get(section.title, []):
            if name in plot_names:
                parts += [f"![{section.title.lower()}]({name})", ""]
        if section.title in SECTION_NOTES:
            parts += [SECTION_NOTES[section.title], ""]
        parts += [*section.notes]
    if plot_note:
        parts += [plot_note, ""]
    return "\n".join(parts).rstrip("\n") + "\n"


def write_document(data: RunData, out_dir: Path) -> tuple[Path, list[Path]]:
    """Write performance.md and the plots into `out_dir`; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots, plot_note = write_plots(data, out_dir)
    document = out_dir / "performance.md"
    text = markdown_document(data, plots, plot_note)
    if out_dir.resolve() != (Path(__file__).resolve().parents[1] / "docs"):
        text = text.replace(
            "](../bench/README.md)", f"]({os.path.relpath(Path(__file__).parent / 'README.md', out_dir)})"
        )
    document.write_text(text, encoding="utf-8")
    return document, plots
