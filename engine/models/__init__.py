"""Models the engine serves."""
