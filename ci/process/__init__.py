"""Process control, one owner: spawning a block, waiting within its limit, stack dumps, teardown, reaping."""
