"""Models the engine serves: the interface (base.py) and its implementations."""
