"""`python -m ci.report.timeline RESULTS_JSON -o OUT.png`: draw a run's timeline with matplotlib.

Exit 0 when drawn; 2 when the record cannot be read (it names the file and why), when matplotlib is
missing (it names the extra to install) or when the PNG cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ci import __version__
from ci.base.files import os_error_text
from ci.base.text import error_line, plural
from ci.record import RECORD_FILE, RecordError, read_record
from ci.report.timeline import timeline_of_record
from ci.report.timeline.png import MissingExtra, draw_png

__all__ = ["main"]

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.report.timeline",
        description="Draw a run's timeline as a PNG: one bar per block on the run's clock, coloured by status, "
        "with each block's peak RSS and CPU seconds. Needs matplotlib: pip install 'guide-guard[timeline]'.",
    )
    parser.add_argument("record", help=f"the run's {RECORD_FILE}, or the output directory holding it")
    parser.add_argument(
        "-o", "--output", help="the PNG to write (default: timeline.png beside the record)", default=None
    )
    parser.add_argument("--dpi", type=int, default=100, help="dots per inch of the PNG (default: 100)")
    parser.add_argument(
        "--version", action="version", version=f"guide-guard {__version__}", help="print the version and exit"
    )
    return parser


def _error(message: str) -> int:
    print(error_line(message), file=sys.stderr, flush=True)  # ci.report is below ci.cli and its print_error
    return USAGE_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = Path(args.record)
    if path.is_dir():
        path = path / RECORD_FILE
    if args.dpi < 10:
        return _error(f"--dpi {args.dpi}: give 10 or more")
    try:
        run = read_record(path)
    except RecordError as exc:
        return _error(str(exc))
    output = Path(args.output) if args.output else path.parent / "timeline.png"
    timelines = [timeline_of_record(guide) for guide in run.guides]
    try:
        drawn = draw_png(timelines, output, dpi=args.dpi)
    except MissingExtra as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write {output}: {os_error_text(exc, output)}")
    print(f"{output}: the timeline of {plural(drawn, 'block')} from {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
