"""Command line: `python -m ci.drift --base REV [GUIDE ...]` checks changed guides on a pull request without running them."""

from __future__ import annotations

import sys

from ci.maintain.drift import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
