"""[simulation] accelerate, reduced to what SpecForge's trainer imports (accelerate.utils.set_seed)."""

__version__ = "0.0.0+rehearsal"
