"""Guide text to a validated plan: reading, parsing in a dialect, front matter, time limits, every document error."""
