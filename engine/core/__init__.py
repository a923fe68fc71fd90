"""Engine internals: admission, scheduling, the step, the runner and its graphs, output."""
