"""Reporters: render finished outcomes (and live events) as a job log, JUnit, GitHub Actions output and results.json."""
