"""Execution: one guide's run, step by step, to its finished outcome (what it left running ended, its files collected)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Mapping
from pathlib import Path

from ci.base import frozen
from ci.base.files import make_directories
from ci.base.signals import signal_name
from ci.guide.model import Plan, Status, Step
from ci.process.supervisor import ProcessSupervisor
from ci.record.format import iso
from ci.record.outcome import BlockResult, Collection, DiagnosticResult, EarlierRun, GuideOutcome
from ci.runner.attempts import run_attempts
from ci.runner.cleanup import run_cleanup
from ci.runner.collect import COLLECT_PAST_DEADLINE_S, collect_files, mark_predating
from ci.runner.diagnostics import run_diagnostics
from ci.runner.events import Events, Listener
from ci.runner.outputs import OutputFiles, output_paths, output_stem
from ci.runner.reason import block_reason
from ci.runner.step import StepContext, run_step, unstarted_result
from ci.runner.stored import kept_value, stored_value_warning

__all__ = ["DEFAULT_ERROR_MARKERS", "RUN_DEADLINE", "KeptBlock", "RunOptions", "not_run_outcome", "run_guide"]

DEFAULT_ERROR_MARKERS = ("[ERROR]", "Traceback (most recent call last)")
RUN_DEADLINE = "run deadline"  # the reason of every block left out because --deadline was reached


@frozen
class KeptBlock:
    """A block a resumed run does not run again: it passed in the run resumed (ci.run.resume)."""

    earlier: EarlierRun  # the run it passed in
    reason: str  # the skipped block's message
    stored: tuple[str, str] | None  # (name, whole value) it stored there, for a setup with store
    loaded_sha256: Mapping[str, str] = dataclasses.field(default_factory=dict)  # what it loaded there (recorded)


@frozen
class RunOptions:
    """How to run a plan: where, with which extra settings."""

    workdir: str  # every block's working directory: the harness moves there before the first block
    output_dir: Path  # block outputs go under output_dir/blocks, collected files under output_dir/collected
    preset: Mapping[str, str]  # values stored before the first block (--set)
    error_markers: tuple[str, ...]  # defaults and --error-marker; the guide's are added
    keep_going: bool  # run the remaining blocks after a failure
    past_mismatch: bool = False  # a mismatch does not stop the guide (--update: it is what will be rewritten)
    guide_dir: str = ""  # keeps guides apart when several run together: blocks/GUIDE_DIR-NNN-..., collected/GUIDE_DIR/
    deadline: float | None = None  # --deadline: when the whole run must stop (time.monotonic()), if set
    # last over every block's environment, the guide's ci.env included: the run's private copies of the
    # Actions runner's files (ci.runner.actions_files), so that no block writes the runner's own
    private_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    kept: Mapping[int, KeptBlock] = dataclasses.field(default_factory=dict)  # --resume: ordinal -> block kept

    @property
    def file_prefix(self) -> str:
        """Before each block's file names and marker value: GUIDE_DIR-, or nothing."""
        return f"{self.guide_dir}-" if self.guide_dir else ""


def not_run_outcome(
    plan: Plan, reason: str, *, deadline_reached: bool = False, first: Status = Status.NOT_RUN
) -> GuideOutcome:
    """The outcome of a guide that never started (the run was interrupted, or its deadline reached, before it).

    `first` is the status of its first block: ERROR when the guide itself could not start.
    """
    return GuideOutcome(
        plan=plan,
        results=tuple(
            unstarted_result(step, first if index == 0 else Status.NOT_RUN, reason)
            for index, step in enumerate(plan.steps)
        ),
        leftovers=(),
        interrupted_by=None,
        started_at=iso(time.time()),
        duration_s=0.0,
        deadline_reached=deadline_reached,
    )


def _unenterable(plan: Plan, workdir: str, exc: OSError) -> GuideOutcome:
    """The outcome of a guide whose working directory cannot be entered: its first block says why, the rest wait."""
    why = f"could not be run: cannot enter the working directory {workdir} ({exc.strerror or exc}); was it removed?"
    return not_run_outcome(plan, why, first=Status.ERROR)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def run_guide(
    plan: Plan,
    *,
    left_out: Mapping[int, str],
    options: RunOptions,
    supervisor: ProcessSupervisor,
    listener: Listener,
) -> GuideOutcome:
    """Run a guide to its end and return its finished outcome.

    Every step runs in order (unless left out, skipped, or stopped by a
    failure, --deadline or a stop signal); then every process the guide left
    running is ended, its ci.collect files are copied, and its ci.cleanup
    commands run. A stop signal ends the running block and leaves the rest
    not run; it is not raised.
    """
    try:
        os.chdir(options.workdir)  # blocks inherit it (see ProcessSupervisor.start)
    except OSError as exc:  # an earlier guide's block removed it, say: this guide cannot start, the run goes on
        return _unenterable(plan, options.workdir, exc)
    started_wall = time.time()  # what a file last modified before it cannot be this guide's (ci.runner.predating)
    clock = time.monotonic()
    context = _context(plan, {**left_out, **{o: "" for o in options.kept}}, options, supervisor, listener)
    guide_run = _GuideRun(
        plan,
        left_out,
        context,
        kept=options.kept,
        preset=options.preset,
        keep_going=options.keep_going,
        past_mismatch=options.past_mismatch,
        clock=clock,
        started_wall=started_wall,
    )
    _take_every_step(guide_run, context)
    duration_s = time.monotonic() - clock
    # a stop signal, also one that comes during it, cuts the teardown's grace period to a second
    leftovers = tuple(supervisor.teardown())
    collection = _collect(plan, options, supervisor, started_wall)
    cleanup = _cleanup(plan, options, supervisor, context.env)  # last: processes ended, files collected
    interrupted_by = guide_run.interrupted_by
    if interrupted_by is None:  # a signal that came after the last block, during the teardown or the collection
        interrupted_by = supervisor.stop_requested()
    return GuideOutcome(
        plan=plan,
        results=tuple(guide_run.results),
        leftovers=leftovers,
        interrupted_by=interrupted_by,
        started_at=iso(started_wall),
        duration_s=duration_s,
        collection=collection,
        cleanup=cleanup,
        deadline_reached=guide_run.deadline_reached,
    )


def _take_every_step(guide_run: _GuideRun, context: StepContext) -> None:
    try:
        for step in guide_run.plan.steps:
            guide_run.take(step)
    finally:  # what ran is reported, and no file of a block that never ran is left, whatever happens
        try:
            context.events.flush()
        finally:
            context.output_files.remove_unused()


def _context(
    plan: Plan, left_out: Mapping[int, str], options: RunOptions, supervisor: ProcessSupervisor, listener: Listener
) -> StepContext:
    options.output_dir.mkdir(parents=True, exist_ok=True)  # as the user named it
    make_directories(options.output_dir / "blocks", within=options.output_dir)  # but blocks/ is the run's own
    runnable = [step for step in plan.steps if step.skip_reason is None and step.ordinal not in left_out]
    paths = {
        step.ordinal: output_paths(output_stem(options.output_dir, options.file_prefix, step), step.merge_streams)
        for step in runnable
    }
    return StepContext(
        supervisor=supervisor,
        env={**os.environ, "PWD": _pwd(options.workdir), **plan.settings.env, **options.private_env},
        markers=tuple(dict.fromkeys((*options.error_markers, *plan.settings.error_markers))),
        events=Events(listener, len(plan.steps)),
        output_files=OutputFiles(options.output_dir),
        output_dir=options.output_dir,
        file_prefix=options.file_prefix,
        deadline=options.deadline,
        paths=paths,
        following={step.ordinal: paths[after.ordinal] for step, after in itertools.pairwise(runnable)},
    )


def _collect(plan: Plan, options: RunOptions, supervisor: ProcessSupervisor, started_wall: float) -> Collection | None:
    """Copy the guide's ci.collect files into OUTPUT_DIR/collected/, once its processes are ended, whatever its verdict.

    A stop signal, before or during the copies, cuts them to the stopping
    limits; with --deadline they end a minute after it, or after their
    start when that is later.
    """
    if not plan.settings.collect:
        return None
    collected = options.output_dir / "collected"
    deadline = options.deadline
    if deadline is not None:
        deadline = max(deadline, time.monotonic()) + COLLECT_PAST_DEADLINE_S
    collection = collect_files(
        plan.settings.collect,
        workdir=options.workdir,
        destination=collected / options.guide_dir if options.guide_dir else collected,
        home=plan.settings.env.get("HOME"),  # as the blocks had it
        deadline=deadline,
        stop_requested=supervisor.stop_requested,
        exclude=options.output_dir,
    )
    return mark_predating(collection, started_wall)


def _cleanup(
    plan: Plan, options: RunOptions, supervisor: ProcessSupervisor, env: Mapping[str, str]
) -> tuple[DiagnosticResult, ...]:
    """Run the guide's ci.cleanup commands, with the blocks' environment, whatever its verdict (a stop shortens them)."""
    return run_cleanup(
        plan.settings.cleanup,
        limit_s=plan.settings.cleanup_timeout_s,
        output_dir=options.output_dir,
        file_prefix=options.file_prefix,
        deadline=options.deadline,
        env=env,
        supervisor=supervisor,
    )


class _GuideRun:
    """One guide's steps being run: the values stored so far, the results, and once decided, why the rest is not run."""

    def __init__(
        self,
        plan: Plan,
        left_out: Mapping[int, str],
        context: StepContext,
        *,
        kept: Mapping[int, KeptBlock],
        preset: Mapping[str, str],
        keep_going: bool,
        past_mismatch: bool = False,
        clock: float,
        started_wall: float,
    ) -> None:
        self.plan = plan
        self.clock = clock  # time.monotonic() when the guide started: each block's start_s counts from it
        self.started_wall = started_wall  # time.time() then: a file its diagnostics name, modified before, is old
        self.left_out = left_out
        self.kept = kept  # blocks a resumed run keeps from the run it resumes
        self.context = context
        self.keep_going = keep_going
        self.past_mismatch = past_mismatch  # a mismatch does not stop the guide
        self.stored: dict[str, str] = dict(preset)  # the values stored so far, whole; run_step adds to it
        # the last step that loads each name: after it, the value is let go (a run may store many large ones)
        self.last_load = {
            load.name: step.ordinal
            for step in plan.steps
            for load in (*step.loads, *(step.expected.loads if step.expected else ()))
        }
        # a name whose last setup ran, or was meant to, without storing it -> what became of that setup
        self.unstored: dict[str, str] = {}
        self.results: list[BlockResult] = []
        self.stop_reason: str | None = None  # set: every step from here on is not run, for this reason
        self.interrupted_by: int | None = None  # the stop signal's number, once one came
        self.deadline_reached = False

    def take(self, step: Step) -> None:
        """Run the step, or say why it is not run; then decide whether the next one runs."""
        self._take(step)
        if step.store is not None and self.results and self.results[-1].step is step:
            self._note_store(step, self.results[-1])

    def _note_store(self, step: Step, result: BlockResult) -> None:
        """Keep why a setup with `store` stored nothing, for the blocks that load its value."""
        assert step.store is not None
        if result.status is Status.PASSED:
            self.unstored.pop(step.store, None)
            return
        what = _SETUP_ENDING.get(result.status, result.status.value)
        self.unstored[step.store] = f"its setup {step.name} (line {step.line}) {what} ({result.message})"

    def _take(self, step: Step) -> None:
        self._interrupted(self.context.supervisor.stop_requested())
        self._check_deadline()
        if self.stop_reason is not None:
            self.results.append(unstarted_result(step, Status.NOT_RUN, self.stop_reason))
            return
        if step.ordinal in self.left_out:
            self.results.append(unstarted_result(step, Status.NOT_RUN, self.left_out[step.ordinal]))
            return
        if step.ordinal in self.kept:
            self.results.append(self._kept(step, self.kept[step.ordinal]))
            self.context.events.finished(self.results[-1])
            return
        if step.skip_reason is not None:
            self.results.append(unstarted_result(step, Status.SKIPPED, step.skip_reason))
            self.context.events.finished(self.results[-1])
            return
        start_s = time.monotonic() - self.clock
        try:
            result = self._run(step, start_s)
        except Exception:  # a bug in the harness: this block is its error, the guide stops, the run reports
            from ci.runner.bug import internal_error_result  # a harness bug, never on a sound run

            result = dataclasses.replace(internal_error_result(step, self.context), start_s=start_s)
            self.results.append(result)
            self.context.events.finished(result)
            self.stop_reason = f"after an internal error of guide-guard in block {step.name} (line {step.line})"
            return
        self.results.append(result)
        self._check_deadline()  # the reason for what follows, before any failure
        goes_on = self.keep_going or (self.past_mismatch and result.status is Status.MISMATCH)
        if result.status.is_failure and not goes_on and self.stop_reason is None:
            self.stop_reason = f"after block {step.name} (line {step.line}) {result.status.value}"

    def _kept(self, step: Step, kept: KeptBlock) -> BlockResult:
        """The result of a block kept from the run resumed: skipped, with the value it stored there (kept whole on
        disk when long, so that this run's record can be resumed in turn)."""
        result = unstarted_result(step, Status.SKIPPED, kept.reason)
        stored = None
        if kept.stored is not None:
            stem = self.context.stem(step)
            stored = (kept.stored[0], kept_value(kept.stored[1], stem, self.context.output_dir))
        return dataclasses.replace(result, stored=stored, kept_from=kept.earlier, loaded_sha256=kept.loaded_sha256)

    def _run(self, step: Step, start_s: float) -> BlockResult:
        """Run the step (started START_S into the guide) and its diagnostics, and report it."""
        unstored = self._unstored_message(step)
        if unstored is not None:
            result, signum = unstarted_result(step, Status.ERROR, unstored), None
            result = dataclasses.replace(result, start_s=start_s)
        else:  # a retried block's start_s is its last attempt's
            result, signum = run_attempts(step, self.stored, self.context, run_step, clock=self.clock)
        context = self.context
        reason = block_reason(result, markers=context.markers, warnings=self.plan.warnings)
        result = dataclasses.replace(result, reason=reason)
        if step.store is not None and result.status is Status.PASSED:
            warning = stored_value_warning(step, self.stored[step.store], self.plan.steps)
            result = dataclasses.replace(result, warnings=(warning,) if warning else ())
        for name in [name for name in self.stored if self.last_load.get(name, 0) <= step.ordinal]:
            del self.stored[name]
        self._interrupted(signum)
        result, signum = run_diagnostics(
            result,
            self.plan.settings,
            stem=self.context.stem(step),
            output_dir=self.context.output_dir,
            tag=self.context.tag(step),
            deadline=self.context.deadline,
            env=self.context.env,
            supervisor=self.context.supervisor,
            started_at=self.started_wall,
        )
        self._interrupted(signum)
        self.context.events.started(step, *self.context.paths[step.ordinal])  # unless its spawn did
        self.context.events.finished(result)
        return result

    def _unstored_message(self, step: Step) -> str | None:
        """Why the step cannot run, when a value it loads was never stored: what became of the setup meant to store it."""
        loads = (*step.loads, *(step.expected.loads if step.expected else ()))
        missing = sorted({load.name for load in loads if load.name not in self.stored})
        if not missing:
            return None
        why = "; ".join(
            f"{name} was never stored: {self.unstored.get(name, 'its setup did not run')}" for name in missing
        )
        return f"could not be run: {why}; fix that, or pass --set {missing[0]}=VALUE"

    def _interrupted(self, signum: int | None) -> None:
        if signum is not None and self.stop_reason is None:
            self.interrupted_by = signum
            self.stop_reason = f"run interrupted by {signal_name(signum)}"

    def _check_deadline(self) -> None:
        if self.stop_reason is None and _past(self.context.deadline):
            self.stop_reason, self.deadline_reached = RUN_DEADLINE, True


# what became of a setup that stored nothing, by its status, for the blocks that load its value
_SETUP_ENDING = {
    Status.FAILED: "failed",
    Status.TIMED_OUT: "timed out",
    Status.ERROR: "could not be run to its end",
    Status.SKIPPED: "was skipped",
    Status.NOT_RUN: "was not run",
}


def _pwd(workdir: str) -> str:
    """PWD for the blocks, as a shell that did `cd` there would have it (bash checks it; python does not).

    The harness's own PWD is kept when it names the working directory (a
    path through a symbolic link, as the user typed it).
    """
    inherited = os.environ.get("PWD", "")
    try:
        if os.path.isabs(inherited) and os.path.samefile(inherited, workdir):
            return inherited
    except OSError:
        pass
    return workdir
