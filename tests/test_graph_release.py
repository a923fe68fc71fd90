"""StagedGraphs.release (a bench switching the codec's conv kernels): the next capture must not reuse the pool of
graphs that are all gone, which CUDA's caching allocator refuses (INTERNAL ASSERT use_count > 0) until empty_cache."""
import weakref

import pytest
import torch

from engine.core import graphs


class Allocator:
    """The caching allocator's rule for graph pools: a pool is shared only while a graph lives in it."""

    def __init__(self):
        self.live: dict[int, weakref.WeakSet] = {}
        self.next_id = 0

    def capture(self, fn, inputs, pool=None, stream=None, warm=True):
        if pool is None:
            self.next_id += 1
            pool = self.next_id
        elif not self.live.get(pool):
            raise RuntimeError(f"INTERNAL ASSERT FAILED: pool {pool} has no live graph (use_count > 0)")
        out = fn(*inputs)
        graph = type("Graph", (), {"pool": lambda _: pool, "replay": lambda _: out.copy_(fn(*inputs))})()
        self.live.setdefault(pool, weakref.WeakSet()).add(graph)
        return graph, out


@pytest.fixture
def stage(monkeypatch):
    monkeypatch.setattr(graphs, "capture_graph", Allocator().capture)
    return graphs.StagedGraphs(lambda _, x: x * 2, [0], [1, 2, 4], use_graphs=True)


def test_graphs_of_another_kernel_choice_capture_after_release(stage):
    x = torch.ones(3, 2)
    assert torch.equal(stage(None, x), x * 2) and len(stage.graphs) == 1
    stage.release()
    assert stage.graphs == {}
    assert torch.equal(stage(None, x[:1]), x[:1] * 2) and len(stage.graphs) == 1


def test_clearing_the_graphs_alone_would_reuse_a_dead_pool(stage):
    stage(None, torch.ones(3, 2))
    stage.graphs.clear()
    with pytest.raises(RuntimeError, match="use_count"):
        stage(None, torch.ones(1, 2))
