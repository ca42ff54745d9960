"""The guide registry's entries as read from guides.yaml, and the GitHub Actions matrix they make."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from ci.base import frozen
from ci.guide.model import TimeoutRule

__all__ = [
    "BLOCK_HEADROOM_MINUTES",
    "DEADLINE_MARGIN_MINUTES",
    "ENTRY_NAME",
    "GROUPS",
    "MATRIX_KEYS",
    "REGISTRY_FILE",
    "UPSTREAM_SIGNALS",
    "Entry",
    "Registry",
    "Upstream",
]

REGISTRY_FILE = "guides.yaml"  # at the repository root
# An entry's name: an artifact name, a cache key, and the board's file names (NAME.json), never a path.
ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,79}\Z")
GROUPS = ("nightly", "weekly")  # the schedule groups; guides.yml has a cron for each
# What the monitor may watch (ci.monitor --signals); `retry` of a failed run always applies.
UPSTREAM_SIGNALS = ("release", "branch", "guide", "model")
# guide-run.yml's DEADLINE_MARGIN_MINUTES: the harness's deadline is this far below the job's limit.
DEADLINE_MARGIN_MINUTES = 15
# Between the guide's longest block limit and the run's deadline: the rest of the guide around that block.
BLOCK_HEADROOM_MINUTES = 30

# The keys of one matrix row: exactly what guides.yml's run job reads as `matrix.KEY`.
MATRIX_KEYS = (
    "name",
    "guide",
    "runner-labels",
    "image",
    "container-options",
    "timeout-minutes",
    "monitor",
    "upstream-ref",
    "upstream-repo",
    "upstream-branch",
    "upstream-model",
    "upstream-model-revision",
    "monitor-signals",
    "set",
    "only",
    "variables",
    "secrets",
    "dialect",
    "timeout-rules",
)


@frozen
class Upstream:
    """What the monitor watches for an entry; an empty value leaves it to the guide's front matter (ci.upstream)."""

    repo: str = ""  # GitHub OWNER/NAME
    branch: str = ""  # the branch whose head commit the `branch` signal watches
    ref: str = ""  # UPSTREAM_REF of a run when the monitor names no ref
    model: str = ""  # Hugging Face Hub model id
    model_revision: str = ""
    signals: tuple[str, ...] = ()  # empty: ci.monitor's own choice from what is configured


@frozen
class Entry:
    """One guide of the registry, its defaults applied."""

    name: str
    guide: str  # a path relative to the registry's directory, or an https URL pinned to a commit
    line: int  # of the entry in the registry
    runner: tuple[str, ...]  # runner labels
    image: str = ""  # "" runs on the runner itself, without a container
    container_options: str = ""
    timeout_minutes: int = 300
    schedule: str = "nightly"
    monitor: bool = True
    upstream: Upstream = field(default_factory=Upstream)
    set: tuple[tuple[str, str], ...] = ()  # --set NAME=VALUE, in order
    only: tuple[str, ...] = ()  # --only
    variables: str = ""  # PREFIX of repository variables that override runner, options and ref
    secrets: tuple[str, ...] = ()  # the secrets its blocks get besides HF_TOKEN (variable names), in order
    dialect: str = "labels"  # how the guide is read: ci.run's --dialect
    timeout_rules: tuple[TimeoutRule, ...] = ()  # limits by command kind for the plain dialects: --timeout-rule
    lines: Mapping[str, int] = field(default_factory=dict, compare=False)  # of each key given, defaults included

    def line_of(self, key: str) -> int:
        """The registry line of KEY (in the entry, or in defaults), else of the entry."""
        return self.lines.get(key, self.line)

    @property
    def is_url(self) -> bool:
        return self.guide.startswith(("http://", "https://"))

    def matrix_row(self) -> dict[str, Any]:
        """The entry as one row of the matrix: every value a string, but the number and the flag."""
        row = {
            "name": self.name,
            "guide": self.guide,
            "runner-labels": json.dumps(list(self.runner)),
            "image": self.image,
            "container-options": self.container_options,
            "timeout-minutes": self.timeout_minutes,
            "monitor": self.monitor,
            "upstream-ref": self.upstream.ref,
            "upstream-repo": self.upstream.repo,
            "upstream-branch": self.upstream.branch,
            "upstream-model": self.upstream.model,
            "upstream-model-revision": self.upstream.model_revision,
            "monitor-signals": ",".join(self.upstream.signals),
            "set": "\n".join(f"{name}={value}" for name, value in self.set),
            "only": ",".join(self.only),
            "variables": self.variables,
            "secrets": " ".join(self.secrets),
            "dialect": self.dialect,
            # --timeout-rule TEXT=SECONDS, to the microsecond (`:g` kept 6 digits: 100000.5 s became 100000 s)
            "timeout-rules": "\n".join(
                f"{rule.contains}={rule.timeout_s:.6f}".rstrip("0").rstrip(".") for rule in self.timeout_rules
            ),
        }
        assert tuple(row) == MATRIX_KEYS
        return row


@frozen
class Registry:
    """The registry file's entries, in the file's order."""

    file: str
    entries: tuple[Entry, ...]

    def entry(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.name == name), None)

    def selected(self, group: str | None = None, names: Sequence[str] = ()) -> list[Entry]:
        """The entries of GROUP (all groups when None), only those named when NAMES is given."""
        return [e for e in self.entries if (group is None or e.schedule == group) and (not names or e.name in names)]

    def matrix(self, group: str | None = None, names: Sequence[str] = ()) -> dict[str, list[dict[str, Any]]]:
        """The GitHub Actions matrix of the selected entries: `{"include": [row, ...]}`."""
        return {"include": [entry.matrix_row() for entry in self.selected(group, names)]}
