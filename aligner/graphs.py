"""CUDA graphs of one function, one per shape key (like engine/core/graphs.py, with keys of several dimensions: the
caller lays its inputs out at the key's shapes, aligner/layout.py). A key without a graph (the CPU, or a batch
beyond the largest) runs the very same function eagerly. A graph's output is its static buffer: the next replay of
its key overwrites it, so a caller that keeps it longer copies it. Graphs are captured up front, never while
serving: a capture must not overlap the engine's work on the device."""
from engine.core.graphs import capture_graph


class ShapeGraphs:
    def __init__(self, fn, pool=None, stream=None):
        self.fn, self.pool, self.stream = fn, pool, stream
        self.graphs: dict = {}

    def __call__(self, key, *inputs):
        if key not in self.graphs:
            return self.fn(*inputs)
        graph, buffers, out = self.graphs[key]
        for buffer, x in zip(buffers, inputs):
            if x is not buffer:            # (the graph before's output, captured as this one's input)
                buffer[:len(x)].copy_(x)   # an input may fill only the front of its buffer: the rest is never read
        graph.replay()
        return out

    def capture(self, key, *buffers):
        """A graph for `key` reading its inputs from `buffers` (the caller may share one among keys, or pass another
        graph's output), after one run outside it (cuDNN picks its algorithms then); returns its output."""
        graph, out = capture_graph(self.fn, buffers, self.pool, stream=self.stream)
        self.graphs[key] = (graph, buffers, out)
        return out
