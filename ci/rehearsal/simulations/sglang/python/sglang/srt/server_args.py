"""[simulation] sglang's server arguments: the one place of them that SpecForge's spec-capture patch changes here.

The real patch (patches/sglang/v0.5.18/spec-capture.patch) changes 14 files, server_args.py among them, to add
the --enable-spec-capture flags; the stand-in's base patch changes this file and adds the capture sink.
"""

from __future__ import annotations

import argparse


def add_spec_capture_args(parser: argparse.ArgumentParser) -> None:
    """Unpatched sglang has no spec-capture arguments: --enable-spec-capture stays an unrecognized argument."""
