"""The engine as its callers see it."""
