"""The Actions runner's files ($GITHUB_OUTPUT and the others) as blocks see them: private copies, never the runner's.

The runner reads the step's outputs, environment, PATH and summary from
files it names in these variables. The harness writes its verdict there; a
block that could write there too could forge it (a `verdict=passed` of its
own, a heredoc left open, an HTML comment hiding the harness's table). So
each variable the harness inherited names, for blocks, a file of the run's
own under OUTPUT_DIR/actions-files/, and what blocks wrote there is the
reports' to show, never the runner's to read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from ci.base import frozen
from ci.base.files import create_fresh

__all__ = ["ACTIONS_FILES", "PRIVATE_DIR", "PrivateFiles"]

# Every file the runner reads back after a step (actions/runner, FileCommandManager): its outputs, its
# environment for later steps, PATH additions, the step summary, and an action's saved state.
ACTIONS_FILES = ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_STATE")
PRIVATE_DIR = "actions-files"  # under the output directory


@frozen
class PrivateFiles:
    """The run's private copies of the runner's files, by variable: what blocks see instead of the runner's."""

    paths: Mapping[str, Path] = field(default_factory=dict)  # variable -> the run's own file, for each one inherited

    @classmethod
    def of(cls, output_dir: Path, environ: Mapping[str, str]) -> PrivateFiles:
        """The copies under OUTPUT_DIR/actions-files/ of the runner's files ENVIRON names (not made yet)."""
        return cls({name: output_dir / PRIVATE_DIR / name for name in ACTIONS_FILES if environ.get(name)})

    def make(self) -> None:
        """Make each copy afresh, empty: what an earlier run in the directory left there is not this run's.

        A copy that cannot be made (a full disk) is still named: a block writing
        to it fails, as it would on the runner's own file, and nothing reaches the runner.
        """
        with contextlib.suppress(OSError):
            for path in self.paths.values():
                # a new file, through a real actions-files/ (a link planted in its place, to a directory of the
                # runner's say, is replaced by a directory): what stood at either name is never written
                os.close(create_fresh(path, within=path.parent.parent))

    def env(self) -> dict[str, str]:
        """What goes over a block's environment: each variable naming the run's own file."""
        return {name: str(path) for name, path in self.paths.items()}

    def written(self) -> dict[str, Path]:
        """The files blocks wrote something to, by variable."""
        written = {}
        for name, path in self.paths.items():
            with contextlib.suppress(OSError):
                if path.stat().st_size > 0:
                    written[name] = path
        return written
