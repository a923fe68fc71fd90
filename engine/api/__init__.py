"""The engine as its callers see it: Engine, request handles, request dataclasses and their checks."""
