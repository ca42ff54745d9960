"""What `--resume` saves after a late failure: blocks and seconds run again, resume against the whole guide.

The guide has the SpecForge guide's shape (docs/specforge.md), its slow
steps as sleeps: environment checks, a slow install and a slow model
download, the patches, a capture server that takes a while to come up (and
stays running in the background), the data, then the training step, which
fails until a flag file says it is fixed, and a last check. Each round:

1. the first run fails at the training step (the time already paid);
2. the flag file is written (the fix);
3. the guide is run again whole, and resumed from the first run with
   `--resume`, in turns (the order alternates from round to round).

The table shows, for each, the blocks that ran, the seconds those blocks
took (their `duration_s` summed) and the command's wall time, medians over
the rounds; the resume re-runs the server block, whose process the first
run ended at its end. `--scale` multiplies every sleep.

Then the same on the rehearsal of the SpecForge guide itself
(`python -m ci.rehearse docs/specforge.md`, docs/rehearsal.md), for
`--rehearsal-repeat` rounds: the first rehearsal with
`REHEARSAL_BREAK=trainer-dies` fails at smoke-train-launch; after the fix
(no knob) the whole rehearsal again (a new sandbox, every block), and
`--resume` of the first (its sandbox as it was left, the kept blocks not
run again), in turns. The own guide shows what a resume saves where the
set-up is slow, as on the NPU machine (its sleeps scale); the rehearsal,
whose stand-ins install and download in a fraction of a second, shows the
harness and the guide as they are, set-up of the sandbox included.

    python bench/resume.py [--scale 1.0] [--repeat 3] [--rehearsal-repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import REPO, CommandFailed, Section, SummaryRow, interleaved, median, run_timed

FENCE = "```"
RESUME = "--resume"
WHOLE = "whole guide"
WHOLE_REHEARSAL = "whole rehearsal"
REHEARSED = "docs/specforge.md"
KNOB = "trainer-dies"  # fails smoke-train-launch, the guide's 17th block of 18


def guide_text(scale: float) -> str:
    """The guide, each slow step a sleep of its seconds times SCALE."""

    def seconds(value: float) -> str:
        return f"{value * scale:g}"

    def block(label: str, body: str, result: str | None = None) -> str:
        text = f"{FENCE}shell {label}\n{body}\n{FENCE}\n\n"
        if result is not None:
            ident = label.split('id="')[1].split('"')[0]
            text += f'{FENCE}text #test-result id="{ident}"\n{result}\n{FENCE}\n\n'
        return text

    server = (
        "rm -f ready\n"
        f"(sleep {seconds(2)}; touch ready; exec sleep 600) > server.log 2>&1 &\n"
        "for _ in $(seq 600); do test -f ready && break; sleep 0.05; done\n"
        "test -f ready && echo server up"
    )
    return "# A guide of SpecForge's shape\n\n" + "".join(
        [
            block('#test id="check-python"', "python3 -c 'print(\"python ok\")'", "python ok"),
            block('#test id="check-tools"', "command -v bash >/dev/null && echo tools ok", "tools ok"),
            block('#test-setup id="install"', f"sleep {seconds(3)}; touch installed"),
            block(
                '#test-setup id="download-model" store="model_path"', f"sleep {seconds(4)}; mkdir -p model; echo model"
            ),
            block('#test id="apply-patches"', "test -f installed && echo patched", "patched"),
            block('#test id="start-server"', server, "server up"),
            block('#test-setup id="prepare-data" store="data_path"', f"sleep {seconds(1)}; echo data.jsonl"),
            block(
                '#test id="train" load="model_path>>MODEL" load="data_path>>DATA"',
                'test -f fixed || { echo "trainer died: Client not available" >&2; exit 1; }\n'
                f'sleep {seconds(0.5)}; echo "step 1 on <MODEL> with <DATA>"',
                "step 1 on model with data.jsonl",
            ),
            block('#test id="monitor"', "echo training done", "training done"),
        ]
    )


@dataclass(frozen=True)
class RunFigures:
    """One run of the guide: which blocks ran, their seconds, the command's wall time."""

    ran: tuple[str, ...]  # the blocks run, by name, in order
    block_s: float  # their duration_s summed
    wall_s: float


def figures(output_dir: Path, wall_s: float) -> RunFigures:
    """What the record in OUTPUT_DIR says ran (neither kept nor left out), and the seconds those blocks took."""
    record = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    ran = [b for b in record["blocks"] if b["status"] not in ("skipped", "not_run")]
    return RunFigures(tuple(b["id"] or b["store"] for b in ran), sum(b["duration_s"] for b in ran), wall_s)


def run_guide(work: Path, output: str, *extra: str, expect: int) -> RunFigures:
    timing = run_timed(
        [sys.executable, "-m", "ci.run", "guide.md", "--output-dir", output, *extra],
        cwd=work,
        log=work / f"{output}.log",
        expect=(expect,),
    )
    return figures(work / output, timing.wall_s)


@dataclass(frozen=True)
class ResumeResult:
    """Median figures of the first (failing) run, the whole guide again, and the resume."""

    first: RunFigures
    runs: dict[str, RunFigures]  # WHOLE and RESUME, medians of block_s and wall_s; ran from the last round


def medians(found: list[RunFigures]) -> RunFigures:
    """The blocks of the last sample (every round runs the same ones), median seconds."""
    return RunFigures(found[-1].ran, median([f.block_s for f in found]), median([f.wall_s for f in found]))


def run_resume(scale: float, repeat: int, section: Section, rehearsal_repeat: int = 0) -> ResumeResult:
    """The own guide's figures (printed), then, with REHEARSAL_REPEAT rounds, the rehearsal's (printed too)."""
    firsts: list[RunFigures] = []
    with tempfile.TemporaryDirectory(prefix="gg-resume-") as tmp:
        rounds: list[Path] = []
        for index in range(repeat):  # every round's first run, before the fix
            work = Path(tmp) / f"round-{index}"
            work.mkdir()
            (work / "guide.md").write_text(guide_text(scale), encoding="utf-8")
            firsts.append(run_guide(work, "first", expect=1))
            (work / "fixed").touch()
            rounds.append(work)
        samples = interleaved(
            {
                WHOLE: lambda index: run_guide(rounds[index], f"whole-{index}", expect=0),
                RESUME: lambda index: run_guide(rounds[index], f"resumed-{index}", RESUME, "first", expect=0),
            },
            repeat,
        )
    runs = {name: medians(found) for name, found in samples.items()}
    first = medians(firsts)
    total = len(first.ran) + 1  # the first run stops at the training step, before the last block
    section.line(f"a guide of {total} blocks that fails at its training step (block {total - 1}); sleeps x{scale:g};")
    section.line(f"median of {repeat} rounds, the whole guide and the resume interleaved")
    _print(first, runs, WHOLE, "first run (fails at train)", "late failure, after the fix: --resume", section)
    section.notes.append(
        "The own guide has the SpecForge guide's shape, its slow steps as sleeps (install 3 s, model download 4 s, a"
        " server up after 2 s, data 1 s, a training step of 0.5 s); the resume keeps what passed, re-runs the"
        " server block (the first run ended its process at its end) and starts at the training step."
    )
    if rehearsal_repeat > 0:
        section.line()
        run_rehearsal_resume(rehearsal_repeat, section)
    return ResumeResult(first, runs)


def rehearse(root: Path, output: str, *extra: str, knob: str = "", expect: int) -> RunFigures:
    """One `python -m ci.rehearse` of the SpecForge guide into ROOT/OUTPUT, timed; KNOB its REHEARSAL_BREAK."""
    env = {name: value for name, value in os.environ.items() if name != "REHEARSAL_BREAK"}
    env.update({"REHEARSAL_BREAK": knob} if knob else {})
    timing = run_timed(
        [sys.executable, "-m", "ci.rehearse", REHEARSED, "--output-dir", str(root / output), *extra],
        cwd=REPO,
        log=root / f"{output}.log",
        expect=(expect,),
        env=env,
    )
    return figures(root / output, timing.wall_s)


def run_rehearsal_resume(repeat: int, section: Section) -> ResumeResult:
    """The rehearsal failing with KNOB, then, after the fix, the whole rehearsal and its resume, interleaved."""
    with tempfile.TemporaryDirectory(prefix="gg-resume-rehearsal-") as tmp:
        root = Path(tmp)
        # every round's first rehearsal, before the fix; each resume continues its own round's
        firsts = [rehearse(root, f"first-{index}", knob=KNOB, expect=1) for index in range(repeat)]
        samples = interleaved(
            {
                WHOLE_REHEARSAL: lambda index: rehearse(root, f"whole-{index}", expect=0),
                RESUME: lambda index: rehearse(
                    root, f"resumed-{index}", RESUME, str(root / f"first-{index}"), expect=0
                ),
            },
            repeat,
        )
    runs = {name: medians(found) for name, found in samples.items()}
    first = medians(firsts)
    section.line(f"the rehearsal of {REHEARSED} ({len(first.ran) + 1} blocks), REHEARSAL_BREAK={KNOB} first:")
    section.line(f"median of {repeat} rounds, the whole rehearsal and the resume interleaved")
    _print(first, runs, WHOLE_REHEARSAL, f"first ({KNOB})", f"rehearsal after {KNOB}, fixed: --resume", section)
    section.notes += [
        "",  # a paragraph of its own in docs/performance.md
        f"The rehearsal: `REHEARSAL_BREAK={KNOB} python -m ci.rehearse {REHEARSED}` fails at smoke-train-launch;"
        f" after the fix (no knob) the whole rehearsal builds a new sandbox and runs every block, while"
        f" `--resume` of the first reuses its sandbox as it was left (packages, model, clone), keeps the blocks"
        " that passed, re-runs smoke-start-mooncake and smoke-start-sglang (the first run ended their servers at"
        " its end) and starts at smoke-train-launch. Wall time includes each rehearsal's own set-up (the whole"
        " rehearsal's sandbox build).",
    ]
    return ResumeResult(first, runs)


def _print(
    first: RunFigures, runs: dict[str, RunFigures], whole_name: str, first_name: str, measure: str, section: Section
) -> None:
    header = f"{'run':<32} {'blocks run':>10} {'block s':>9} {'wall s':>8}"
    section.table(header)
    rows = [(first_name, first), (f"after the fix: {whole_name}", runs[whole_name])]
    rows.append((f"after the fix: {RESUME}", runs[RESUME]))
    for name, run in rows:
        section.line(f"{name:<32} {len(run.ran):>10} {run.block_s:>9.2f} {run.wall_s:>8.2f}")
    whole, resumed = runs[whole_name], runs[RESUME]
    saved_blocks = len(whole.ran) - len(resumed.ran)
    saved_s = whole.wall_s - resumed.wall_s
    share = saved_s / whole.wall_s if whole.wall_s > 0 else 0.0
    section.line(
        f"{'saved by ' + RESUME:<32} {saved_blocks:>10} {whole.block_s - resumed.block_s:>9.2f} {saved_s:>8.2f}"
    )
    section.line()
    section.line(f"{RESUME} ran: {', '.join(resumed.ran)} ({share:.0%} of the {whole_name}'s wall time saved)")
    section.summary.append(
        SummaryRow(
            "resume",
            measure,
            f"{resumed.wall_s:.2f} s ({len(resumed.ran)} blocks)",
            f"{whole_name} {whole.wall_s:.2f} s ({len(whole.ran)} blocks)",
            f"{resumed.wall_s / whole.wall_s:.2f}x" if whole.wall_s > 0 else "",
            "",
            "",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every sleep of the guide (default 1.0)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the own guide (default 3)")
    parser.add_argument(
        "--rehearsal-repeat", type=int, default=3, help="rounds of the rehearsal (default 3; 0: the own guide only)"
    )
    args = parser.parse_args(argv)
    if args.scale <= 0 or args.repeat < 1 or args.rehearsal_repeat < 0:
        parser.error("--scale must be positive, --repeat at least 1 and --rehearsal-repeat at least 0")
    try:
        run_resume(args.scale, args.repeat, Section("Resume"), args.rehearsal_repeat)
    except CommandFailed as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
