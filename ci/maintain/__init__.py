"""Keeping guides true over time: the monitor, the drift check, --update, and what they read of earlier runs."""
