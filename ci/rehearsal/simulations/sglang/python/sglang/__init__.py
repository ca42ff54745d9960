"""[simulation] sglang 0.5.18 as the 910B image installs it (editable, from /sgl-workspace/sglang/python)."""

__version__ = "0.5.18"
