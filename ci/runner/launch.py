"""Starting one step's process: what every step of the guide's run shares (StepContext), its output files, its body
on the command line or from a file (when no argument can hold it), its interpreter."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path

from ci.base import frozen
from ci.base.files import create_fresh, os_error_text
from ci.base.text import human_size
from ci.guide.model import Language, Step
from ci.process.spawn import WorkdirUnenterable
from ci.process.supervisor import BlockProcess, ProcessSupervisor
from ci.runner.events import Events
from ci.runner.outputs import OutputFiles, output_stem

__all__ = [
    "ARGUMENT_LIMIT_BYTES",
    "Launch",
    "StepContext",
    "body_path",
    "environment_too_large",
    "launches",
    "start_step",
    "too_long_for_an_argument",
]


@frozen
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
    paths: Mapping[int, tuple[Path, Path]]  # ordinal -> stdout and stderr files, for each step that may run
    following: Mapping[int, tuple[Path, Path]]  # ordinal -> the files of the step that may run after it

    def stem(self, step: Step) -> str:
        """OUTPUT_DIR/blocks/PREFIXNNN-name: what the step's output files, dumps and diagnostics are named after."""
        return output_stem(self.output_dir, self.file_prefix, step)

    def tag(self, step: Step) -> str:
        """The step's BLOCK_MARKER value: unique within the run, even when several guides run."""
        return f"{self.file_prefix}{step.ordinal}"


def start_step(step: Step, command: str, context: StepContext) -> BlockProcess | str:
    """Start the step's process; why it could not be, as its result's message, when it could not."""
    stdout_path, stderr_path = context.paths[step.ordinal]
    if not stdout_path.parent.is_dir():  # else the spawn's ENOENT would read as a missing interpreter
        return f"could not be run: the directory of its output files, {stdout_path.parent}, is gone (did a block remove --output-dir?)"
    context.output_files.prepare(stdout_path, stderr_path)  # made already, unless this is the first block
    by_file = too_long_for_an_argument(command)
    try:
        try:
            return _start(step, command, context, by_file)
        except OSError as exc:
            if exc.errno != errno.E2BIG or by_file:
                raise
            return _start(step, command, context, True)  # the body and the environment together are too long
    except OSError as exc:  # no room for its output files, say
        if exc.errno == errno.E2BIG:
            return f"could not be run: {environment_too_large(context.env)}"
        return f"could not be run: {os_error_text(exc, stdout_path) if exc.errno == errno.ENOSPC else exc}"


def _start(step: Step, command: str, context: StepContext, by_file: bool) -> BlockProcess | str:
    """Start the step's process, its body on its command line or, BY_FILE, read from a file; no interpreter: why."""
    stdout_path, stderr_path = context.paths[step.ordinal]
    from_file = body_path(context.stem(step), step.language) if by_file else None
    if from_file is not None:  # a new file, never written through a link or into a FIFO planted at its name
        descriptor = create_fresh(from_file, within=context.output_dir)
        with os.fdopen(descriptor, "wb") as body:
            body.write(os.fsencode(command))
    choices = launches(step.language, command, from_file)
    # merged streams: one descriptor for both, so what the block writes to each lands in its order, in one file
    stderr_target = stdout_path if step.merge_streams else stderr_path
    for launch in choices:
        try:
            return context.supervisor.start(
                launch.argv,
                env=context.env,
                stdout=context.output_files.descriptor(stdout_path),
                stderr=context.output_files.descriptor(stderr_target),
                block_name=step.name,
                block_tag=context.tag(step),
                stdin_path=launch.stdin_path,
            )
        except WorkdirUnenterable as exc:  # before FileNotFoundError: a directory gone is no missing interpreter
            return f"could not be run: {exc.strerror}"
        except FileNotFoundError:
            continue
    return f"could not be run: no {' or '.join(launch.argv[0] for launch in choices)} on PATH"


ARGUMENT_LIMIT_BYTES = 128 * 1024  # MAX_ARG_STRLEN, with the terminating NUL: the longest argument of a program


@frozen
class Launch:
    """One way to start a block: its command line, and where its stdin comes from."""

    argv: tuple[str, ...]
    stdin_path: Path | None = None  # None: empty (/dev/null); else the body, which the interpreter reads whole first


def too_long_for_an_argument(command: str) -> bool:
    """Whether COMMAND, as the bytes a command line would carry, is too long for one argument."""
    return len(os.fsencode(command)) + 1 > ARGUMENT_LIMIT_BYTES


def body_path(stem: str, language: Language) -> Path:
    """The file beside a block's outputs that holds its body when it runs from a file."""
    return Path(f"{stem}.body.{'sh' if language is Language.SHELL else 'py'}")


def launches(language: Language, command: str, from_file: Path | None = None) -> list[Launch]:
    """The ways to start the block, in order; the block's own PATH decides which program they are.

    FROM_FILE: the file COMMAND was written to, when it is to be read from there.
    """
    if language is Language.SHELL:
        return [Launch(("bash", str(from_file)) if from_file else ("bash", "-c", command))]
    # the container's interpreter, as a reader typing `python` would get it
    if from_file:
        return [Launch((python, "-"), from_file) for python in ("python", "python3")]
    return [Launch((python, "-c", command)) for python in ("python", "python3")]


def environment_too_large(env: Mapping[str, str]) -> str:
    """Why Linux refused to start a block whose body was not on its command line (E2BIG): its environment."""
    sizes = {name: len(os.fsencode(name)) + len(os.fsencode(value)) + 2 for name, value in env.items()}
    largest = max(sizes, key=sizes.__getitem__, default="")
    return (
        f"Linux refused to start it (Argument list too long): its environment holds {human_size(sum(sizes.values()))}"
        f" ({largest} alone {human_size(sizes.get(largest, 0))}), more than a program may be started with (one"
        f" variable at most {human_size(ARGUMENT_LIMIT_BYTES)}, all of them at most a quarter of the stack limit,"
        " `ulimit -s`): make the large variables smaller (the guide's ci.env, or the environment the run inherits)"
    )
