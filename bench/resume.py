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

The rehearsal (`python -m ci.rehearse docs/specforge.md`) is not what is
measured: each rehearsal builds a new sandbox, so the blocks a resume keeps
would have installed their packages into the previous one's, and the
re-run server block fails there (docs/performance.md, "Resume").

    python bench/resume.py [--scale 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import CommandFailed, Section, SummaryRow, interleaved, median, run_timed

FENCE = "```"
RESUME = "--resume"
WHOLE = "whole guide"


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


def run_resume(scale: float, repeat: int, section: Section) -> ResumeResult:
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
    runs = {
        name: RunFigures(found[-1].ran, median([f.block_s for f in found]), median([f.wall_s for f in found]))
        for name, found in samples.items()
    }
    first = RunFigures(firsts[-1].ran, median([f.block_s for f in firsts]), median([f.wall_s for f in firsts]))
    _print(first, runs, scale, repeat, section)
    return ResumeResult(first, runs)


def _print(first: RunFigures, runs: dict[str, RunFigures], scale: float, repeat: int, section: Section) -> None:
    total = len(first.ran) + 1  # the first run stops at the training step, before the last block
    section.line(f"a guide of {total} blocks that fails at its training step (block {total - 1}); sleeps x{scale:g};")
    section.line(f"median of {repeat} rounds, the whole guide and the resume interleaved")
    header = f"{'run':<32} {'blocks run':>10} {'block s':>9} {'wall s':>8}"
    section.table(header)
    rows = [("first run (fails at train)", first), (f"after the fix: {WHOLE}", runs[WHOLE])]
    rows.append((f"after the fix: {RESUME}", runs[RESUME]))
    for name, run in rows:
        section.line(f"{name:<32} {len(run.ran):>10} {run.block_s:>9.2f} {run.wall_s:>8.2f}")
    whole, resumed = runs[WHOLE], runs[RESUME]
    saved_blocks = len(whole.ran) - len(resumed.ran)
    saved_s = whole.wall_s - resumed.wall_s
    share = saved_s / whole.wall_s if whole.wall_s > 0 else 0.0
    section.line(
        f"{'saved by ' + RESUME:<32} {saved_blocks:>10} {whole.block_s - resumed.block_s:>9.2f} {saved_s:>8.2f}"
    )
    section.line()
    section.line(f"{RESUME} ran: {', '.join(resumed.ran)} ({share:.0%} of the whole guide's wall time saved)")
    section.summary.append(
        SummaryRow(
            "resume",
            "late failure, after the fix: --resume",
            f"{resumed.wall_s:.2f} s ({len(resumed.ran)} blocks)",
            f"whole guide {whole.wall_s:.2f} s ({len(whole.ran)} blocks)",
            f"{resumed.wall_s / whole.wall_s:.2f}x" if whole.wall_s > 0 else "",
            "",
            "",
        )
    )
    section.notes.append(
        "The guide has the SpecForge guide's shape, its slow steps as sleeps (install 3 s, model download 4 s, a"
        " server up after 2 s, data 1 s, a training step of 0.5 s); the resume keeps what passed, re-runs the"
        " server block (the first run ended its process at its end) and starts at the training step. The"
        " rehearsal itself cannot be resumed: every rehearsal builds a new sandbox, so the packages the kept"
        " blocks installed are in the previous one's, and the re-run `smoke-start-mooncake` fails there; on the"
        " rehearsal's record after `REHEARSAL_BREAK=trainer-dies`, a resume keeps 14 of its 18 blocks, re-runs"
        " smoke-start-mooncake and smoke-start-sglang and starts at smoke-train-launch. See bench/resume.py."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every sleep of the guide (default 1.0)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args(argv)
    if args.scale <= 0 or args.repeat < 1:
        parser.error("--scale must be positive and --repeat at least 1")
    try:
        run_resume(args.scale, args.repeat, Section("Resume"))
    except CommandFailed as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
