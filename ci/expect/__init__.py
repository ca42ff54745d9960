"""A block's output against the expected text: matching, searching, the diff of a mismatch and the line to blame."""
