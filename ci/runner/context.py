"""What every step of one guide's run shares: the supervisor, the environment, the output files, the limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci.base.text import Masker
from ci.guide.model import Step
from ci.process.supervisor import ProcessSupervisor
from ci.runner.events import Events
from ci.runner.outputs import OutputFiles, output_stem

__all__ = ["StepContext"]


@dataclass(frozen=True)
class StepContext:
    """What every step of one guide's run shares."""

    supervisor: ProcessSupervisor
    env: Mapping[str, str]  # every block's environment: the harness's own, PWD, the guide's ci.env, private files
    markers: tuple[str, ...]  # the error markers looked for in stderr: the command line's and the guide's
    events: Events
    output_files: OutputFiles
    output_dir: Path  # block outputs go under output_dir/blocks
    file_prefix: str  # before each block's file names and marker value: keeps guides that run together apart
    deadline: float | None  # --deadline (time.monotonic()), if set
    masker: Masker  # the run's secrets: what it keeps of an output is never cut inside one
    paths: Mapping[int, tuple[Path, Path]]  # ordinal -> stdout and stderr files, for each step that may run
    following: Mapping[int, tuple[Path, Path]]  # ordinal -> the files of the step that may run after it

    def stem(self, step: Step) -> str:
        """OUTPUT_DIR/blocks/PREFIXNNN-name: what the step's output files, dumps and diagnostics are named after."""
        return output_stem(self.output_dir, self.file_prefix, step)

    def tag(self, step: Step) -> str:
        """The step's BLOCK_MARKER value: unique within the run, even when several guides run."""
        return f"{self.file_prefix}{step.ordinal}"
