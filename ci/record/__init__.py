"""results.json, the machine-readable record of a run: its format, its writer and its reader (docs/results.schema.json);
ci.run.resume reads it for a run resumed from it."""

from __future__ import annotations

from ci.record.format import (
    RECORD_FILE,
    RECORD_VERSION,
    AttemptRecord,
    BlockRecord,
    CollectedFileRecord,
    CollectionRecord,
    DiagnosticRecord,
    EarlierRunRecord,
    GuideRecord,
    PredatingFileRecord,
    ProcessRecord,
    RunRecord,
    WholeTextRecord,
)
from ci.record.read import LastRun, RecordedBlock, RecordedGuide, RecordError, read_record, read_run
from ci.record.write import run_record, write_record

__all__ = [
    "RECORD_FILE",
    "RECORD_VERSION",
    "AttemptRecord",
    "BlockRecord",
    "CollectedFileRecord",
    "CollectionRecord",
    "DiagnosticRecord",
    "EarlierRunRecord",
    "GuideRecord",
    "LastRun",
    "PredatingFileRecord",
    "ProcessRecord",
    "RecordError",
    "RecordedBlock",
    "RecordedGuide",
    "RunRecord",
    "WholeTextRecord",
    "read_record",
    "read_run",
    "run_record",
    "write_record",
]
