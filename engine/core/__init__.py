"""The way of a request inside the engine: admission, scheduling, the step, the runner and its graphs, output."""
