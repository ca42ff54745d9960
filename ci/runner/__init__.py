"""The second stage: running a plan (process control, one run per block, collected files)."""
