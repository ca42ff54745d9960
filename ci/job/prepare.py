"""The run job's preparation: the harness's deadline below the job's limit, its directories, the Hub mirror."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PrepareError", "Prepared", "deadline_minutes", "prepare"]

# A `number` input of a reusable workflow as GitHub passes it on: digits, maybe a fraction.
_MINUTES = re.compile(r"[0-9]+(\.[0-9]*)?")


class PrepareError(Exception):
    """An input the run cannot start with; `title` names it, the message says what to give instead."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title


@dataclass(frozen=True)
class Prepared:
    """What the job's later steps get from the preparation."""

    deadline: str  # the harness's --deadline, in whole minutes (`285m`)
    workdir: str  # the directory the blocks run in
    resume_dir: str | None  # where the reports of the run to resume are downloaded; None for a whole run
    hub_mirror: str | None  # HF_ENDPOINT for the blocks; None when no mirror is set (an empty one breaks the Hub)

    def outputs(self) -> dict[str, str]:
        """The step outputs, by name, as the workflow reads them."""
        written = {"deadline": self.deadline, "workdir": self.workdir}
        if self.resume_dir is not None:
            written["resume-dir"] = self.resume_dir
        return written

    def environment(self) -> dict[str, str]:
        """The variables for the job's later steps ($GITHUB_ENV)."""
        return {} if self.hub_mirror is None else {"HF_ENDPOINT": self.hub_mirror}


def deadline_minutes(job_timeout_minutes: str, margin_minutes: int) -> int:
    """The harness's deadline, in whole minutes, MARGIN_MINUTES below the job's limit.

    A fraction of the limit is dropped, which only moves the deadline earlier. A limit that is no
    number, or no longer than the margin, leaves the harness no time at all: PrepareError, naming the minimum.
    """
    text = job_timeout_minutes.strip()
    left = int(text.split(".")[0]) - margin_minutes if _MINUTES.fullmatch(text) else 0
    if left <= 0:
        raise PrepareError(
            "timeout-minutes too small",
            f"the input timeout-minutes is '{job_timeout_minutes}'; give at least {margin_minutes + 1} (minutes):"
            f" the harness's deadline is DEADLINE_MARGIN_MINUTES ({margin_minutes}) below it (docs/runners.md)",
        )
    return left


def prepare(
    job_timeout_minutes: str, margin_minutes: int, workdir: str, hub_mirror: str, resume_dir: str | None
) -> Prepared:
    """The run's preparation from the job's inputs; PrepareError for one it cannot start with.

    $GITHUB_ENV takes one variable a line, so a mirror holding a line break could set another (LD_PRELOAD=...).
    """
    if "\n" in hub_mirror or "\r" in hub_mirror:
        raise PrepareError("HF_ENDPOINT", "the variable HF_ENDPOINT holds a line break; give the mirror's URL alone")
    minutes = deadline_minutes(job_timeout_minutes, margin_minutes)
    return Prepared(f"{minutes}m", workdir, resume_dir or None, hub_mirror or None)
