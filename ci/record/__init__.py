"""results.json, the machine-readable record of a run: its format and codec, its writer and its reader
(docs/results.schema.json); ci.run.resume reads it for a run resumed from it."""

from __future__ import annotations

from ci.record.format import RECORD_FILE, RECORD_VERSION, block_from_json, block_to_json
from ci.record.read import LastRun, RecordedGuide, RecordError, read_record, read_run
from ci.record.write import run_record, write_record

__all__ = [
    "RECORD_FILE",
    "RECORD_VERSION",
    "LastRun",
    "RecordError",
    "RecordedGuide",
    "block_from_json",
    "block_to_json",
    "read_record",
    "read_run",
    "run_record",
    "write_record",
]
