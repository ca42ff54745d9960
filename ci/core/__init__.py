"""The first stage: guide text to a validated plan (model, source, parse, plan) and the output matcher, with no side effects."""
