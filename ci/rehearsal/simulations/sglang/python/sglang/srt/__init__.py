"""[simulation] sglang's runtime package; SpecForge's spec-capture patch adds spec_capture_sink.py here."""
