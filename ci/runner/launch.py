"""Starting one step's process: its output files, its body on the command line or from a file, its interpreter."""

from __future__ import annotations

import errno
import os

from ci.core.disk import os_error_text
from ci.core.files import create_fresh
from ci.core.model import Step
from ci.runner.body import body_path, environment_too_large, launches, too_long_for_an_argument
from ci.runner.context import StepContext
from ci.runner.process import BlockProcess
from ci.runner.spawn import WorkdirUnenterable

__all__ = ["start_step"]


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
