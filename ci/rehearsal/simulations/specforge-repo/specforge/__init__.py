"""[simulation] SpecForge, as the guide-guard rehearsal stands it in: a CLI and a one-step trainer, no model."""

__version__ = "0.0.0+rehearsal"
