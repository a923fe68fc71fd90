"""One packing: the rows the planner counts are the rows the batch is built in, and every batch it admits runs on
captured graphs (with the CPU stand-in for CUDA graphs)."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings, strategies as st

from aligner import Aligner, graphs, layout
from aligner.audio_encoder import audio_tokens, chunk_tokens
from aligner.features import mel_shape
from aligner.layout import Fit, largest_first, window_chunks
from tests.graph_stand_in import stand_in_graphs

ISSUE_MIX = [7.5] * 46 + [1.5, 1.5, 3.5, 1.5, 2.5, 2.5]     # 48 rows in arrival order, 49 largest first


@pytest.fixture(scope="module")
def aligner():
    return Aligner.load(dummy="tiny", device="cpu", seed=1)


def jobs(aligner, seconds: list[float], units: list[int] | list[list[str]]):
    """`units`: each job's unit count (each unit "a") or its units."""
    frames, width = mel_shape([int(s * 24000) for s in seconds], 24000)
    return frames, width, [aligner._input_ids(audio_tokens(f), ["a"] * u if isinstance(u, int) else u)
                           for f, u in zip(frames, units)]


def check_plan(aligner, frames, width, ids) -> list:
    """Each batch: built as planned, in shapes with graphs (a job that alone has none runs alone), no slot twice."""
    plan = aligner.model.plan(frames, width, ids)
    assert [a for a, _, _ in plan] == [0] + [b for _, b, _ in plan[:-1]] and plan[-1][1] == len(ids)
    for a, b, lay in plan:
        assert lay.captured or b - a == 1
        if b < len(ids):                            # the planner split only where the next job does not fit
            fit = Fit()
            assert not all([fit.add(f, len(x)) for f, x in zip(frames[a:b + 1], ids[a:b + 1])][-1:])
        chunks = [c for f in frames[a:b] for c in window_chunks(f)]
        assert (lay.conv_frames > 0).sum() == sum(chunks)
        assert [(lay.sequences == i).sum() for i in range(b - a)] == [len(x) for x in ids[a:b]]
        audio = lay.audio_rows[lay.is_audio]
        assert len(set(audio.tolist())) == len(audio) == sum(audio_tokens(f) for f in frames[a:b])
    return plan


def test_the_issues_mix_is_planned_and_built_in_the_same_48_rows(aligner):
    frames, width, ids = jobs(aligner, ISSUE_MIX, [3] * len(ISSUE_MIX))
    plan = check_plan(aligner, frames, width, ids)
    assert len(plan) == 1 and len(plan[0][2].windows) == 48


SECONDS = st.one_of(st.floats(0.02, 8.0), st.sampled_from([7.5, 3.5, 2.5, 1.5]), st.floats(8.0, 40.0))
UNITS = st.one_of(st.integers(1, 40), st.integers(1, 40), st.integers(40, 330))
MIXES = st.integers(1, 128).flatmap(lambda n: st.lists(st.tuples(SECONDS, UNITS), min_size=n, max_size=n))


@pytest.mark.slow                                   # hypothesis: 60 mixes
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(MIXES)
def test_random_mixes_run_on_captured_shapes_as_planned(aligner, mix):
    """Counts up to a full batch, audio up to five windows, texts up to past the widest graph's rows."""
    check_plan(aligner, *jobs(aligner, [s for s, _ in mix], [n for _, n in mix]))


def eager_calls(monkeypatch) -> list:
    calls, call = [], graphs.ShapeGraphs.__call__

    def recording(self, key, *inputs):
        calls.append(key not in self.graphs)
        return call(self, key, *inputs)
    monkeypatch.setattr(graphs.ShapeGraphs, "__call__", recording)
    return calls


def align_on_stand_in(aligner, monkeypatch, items):
    """-> (eager spans, spans on the stand-in graphs of 1, 2 and 4 encoder rows, eager calls among the latter)."""
    for stage in aligner.model.encoder + aligner.model.text:
        monkeypatch.setattr(stage, "graphs", {})
    stand_in_graphs(monkeypatch, rows=[1, 2, 4])
    eager = aligner.align_units(items, 24000)
    aligner.model.capture()
    calls = eager_calls(monkeypatch)
    return eager, aligner.align_units(items, 24000), calls


def audio(seconds: float, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * 24000))).astype(np.float32)


@pytest.mark.slow                                   # graphs captured for four rows
def test_the_issues_mix_scaled_to_four_rows_runs_on_its_graphs(aligner, monkeypatch):
    """Two full windows then the issue's six: 4 rows as planned; packed largest first they took 5, ran eagerly, and
    the 5-row encoder output did not fit the text graph's 4-row buffer (the RuntimeError of the issue)."""
    items = [(audio(s, i), ["a", "b"]) for i, s in enumerate([7.5, 7.5] + ISSUE_MIX[-6:])]
    eager, captured, calls = align_on_stand_in(aligner, monkeypatch, items)
    assert captured == eager and calls and not any(calls)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.floats(0.05, 9.0), st.integers(1, 30)), min_size=1, max_size=8))
@example([(1.0, 1), (9.0, 30)])                     # the plan checked must be of these units, not of as many "a"s
@example([(1.0, 1), (1.0, 1), (9.0, 30)])           # planned largest first: the long job alone, eagerly
def test_random_mixes_on_the_stand_in_graphs_equal_eager(aligner, monkeypatch, mix):
    items = [(audio(s, i), [f"w{k}" for k in range(n)]) for i, (s, n) in enumerate(mix)]
    order = largest_first(list(range(len(mix))), [len(a) for a, _ in items])      # as align_units plans them
    with monkeypatch.context() as m:
        eager, captured, calls = align_on_stand_in(aligner, m, items)
        layouts = aligner.model.plan(*jobs(aligner, [mix[i][0] for i in order], [items[i][1] for i in order]))
    assert captured == eager
    eager_parts = [b - a for a, b, lay in layouts if not lay.captured]
    assert any(calls) == bool(eager_parts) and all(n == 1 for n in eager_parts)   # eager: a job alone past the graphs


def test_a_batch_is_packed_once(aligner, monkeypatch):
    """Each job is added to one packing (again only where it opens the next batch); the build takes it as it is."""
    adds, add = [], Fit.add
    monkeypatch.setattr(Fit, "add", lambda self, *a: adds.append(a) or add(self, *a))
    frames, width, ids = jobs(aligner, [7.5] * 60, [3] * 60)
    plan = aligner.model.plan(frames, width, ids)
    assert len(plan) == 2 and len(adds) == 60 + 1
