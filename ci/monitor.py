"""Command line: `python -m ci.monitor GUIDE --state FILE` says whether a scheduled run is needed, and records its outcome."""

from __future__ import annotations

import sys

from ci.maintain.monitor import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
