"""[simulation] Mooncake (NPU wheel 0.3.13.post1) as the guide-guard rehearsal stands it in."""

__version__ = "0.3.13.post1"
