"""The step's shape: the scheduler plans, the runner only reads what it planned, the scheduler's update applies the
results and its finish() alone ends a stream; a stream's playout and its listener's clock, on a fake clock."""
import ast
from pathlib import Path

import pytest

from engine import Engine, SynthesisRequest
from engine.core.listener_clock import ListenerClock
from engine.core.plan import Plan
from engine.core.playout import Playout, first_chunk_frames, margin_s
from engine.core.sequence import Status
from engine.models.base import AudioFormat
from fake_clock import FakeClock

CORE = Path(__file__).resolve().parent.parent / "engine" / "core"
AUDIO = AudioFormat(num_codebooks=16, samples_per_frame=1920, sample_rate=24000)     # 80 ms frames


def stream_state(s) -> tuple:
    t, kv, p = s.text, s.kv, s.playout
    return (s.status, s.slot, s.frames_started, s.frame_started, s.frames, s.finish_reason, t.fed, t.eos_fed,
            len(t.feed), t.closed, kv.num_tokens, list(kv.block_table), id(kv.cached_prefix),
            p.unread, len(p.unsent), p.chunks, p.listener.sent_samples)


def test_the_runner_writes_no_stream_state_and_the_step_shape_is_kept():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4, clock=FakeClock())    # not started: steps by hand
    runner, calls = engine.runner, []
    for name in ("start", "prefill", "predict", "decode", "talk"):
        def checked(*args, _run=getattr(runner, name), _name=name):
            before = {s.id: stream_state(s) for s in engine.thread.seqs.values()}
            out = _run(*args)
            assert {s.id: stream_state(s) for s in engine.thread.seqs.values()} == before, _name
            calls.append(_name)
            return out
        setattr(runner, name, checked)
    handles = [engine.submit(SynthesisRequest(text=f"Stream {k} speaks.", max_frames=6, ignore_eos=True))
               for k in range(3)]
    for _ in range(100):
        engine.thread.drain()
        if not engine.num_active:
            break
        engine.step.run()
    frames = [sum(len(c.codes) for c in h.iter_blocking()) for h in handles]
    assert frames == [6, 6, 6] and engine.num_active == 0
    assert {"start", "prefill", "predict", "decode", "talk"} <= set(calls)


def test_a_prompt_too_long_is_ended_by_the_update_not_by_a_callback_from_the_scan():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, kv_tokens_per_stream=48)  # prompts up to 95 tokens
    engine.scheduler.admission.kv_tokens = 1 << 20          # past admission's estimate: the scheduler must see it
    long, short = (engine.submit(SynthesisRequest(text=t, instruct=i)) for t, i in (("Hi", "x " * 100),
                                                                                     ("Short one.", None)))
    engine.thread.drain()
    plan = engine.scheduler.schedule(Plan(), 0.0)
    rejected = [s.id for s, _ in plan.rejected]
    assert rejected == [long.id] and engine.thread.seqs[long.id].status is Status.WAITING   # not ended mid-scan
    assert [s.id for s in plan.admitted] == [short.id]
    engine.scheduler.update(plan, [], [])
    with pytest.raises(Exception) as err:
        next(long.iter_blocking())
    assert err.value.code == "text_too_long" and engine.thread.seqs[long.id].status is Status.FINISHED


def test_only_the_scheduler_finishes_a_stream_and_the_runner_assigns_nothing_on_a_stream():
    finishing = [path.name for path in CORE.glob("*.py") if "status = Status.FINISHED" in path.read_text()]
    assert finishing == ["scheduler.py"] and "def end(" not in (CORE / "step.py").read_text()
    tree = ast.parse((CORE / "runner.py").read_text())
    stream_names = {"s", "seq", "seqs"}
    writes = [ast.unparse(t) for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
              for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
              if isinstance(t, ast.Attribute) and isinstance(t.value, (ast.Name, ast.Attribute))
              and ast.unparse(t).split(".")[0] in stream_names]
    assert writes == []


def test_the_listener_clock_plays_from_its_first_audio_and_counts_a_fall_behind():
    clock = ListenerClock(24000)
    assert clock.played_s(5.0) == 0.0 and clock.buffered_s(5.0) == 0.0 and not clock.started
    assert clock.add(24000, 10.0) == 10.0                   # 1 s at t=10: needed now
    assert clock.add(12000, 10.2) == 11.0                   # queued behind the first second
    assert clock.played_s(10.5) == 0.5 and clock.buffered_s(10.5) == pytest.approx(1.0)
    assert clock.buffered_s(12.0) == pytest.approx(-0.5)    # dry for 0.5 s: the engine sees how far behind
    assert clock.add(2400, 12.0) == 12.0                    # a player that waited out the gap needs it now


def test_playout_chunks_by_size_then_early_when_the_listener_runs_low():
    p = Playout((1, 2, 4), True, AUDIO)
    p.unsent = [("c", "pcm")] * 3
    assert p.chunk_size(first=2) == 2 and p.should_send(0.0, 0.3, 2, generated=False)
    assert len(p.take(2, 0.0)) == 2 and p.listener.sent_samples == 2 * 1920 and p.chunk_size() == 2
    assert not p.should_send(0.0, 0.1, 1, generated=False)          # 160 ms buffered, one frame of the next two
    assert p.should_send(0.0, 0.3, 1, generated=False)              # under the margin: the one frame goes early
    assert p.should_send(0.1, 0.1, 1, generated=False)              # 100 ms played: 60 ms left
    fixed = Playout((1, 2), False, AUDIO)
    fixed.unsent = [("c", "pcm")] * 2
    fixed.take(1, 0.0)
    assert not fixed.should_send(1.0, 9.0, 1, generated=False)     # not adaptive: only a full chunk goes
    p.unread = 1
    assert not p.should_send(0.0, 0.0, 1, generated=True)           # its last frame is still on the device
    p.unread = 0
    assert p.should_send(0.0, 0.0, 1, generated=True)


def test_the_first_chunk_and_margin_policy():
    assert margin_s(0.01) == 0.3 and margin_s(0.1) == pytest.approx(0.4)
    assert first_chunk_frames(0.01, 0.08, admitted=1, admitting=False) == 1
    assert first_chunk_frames(0.01, 0.08, admitted=2, admitting=False) == 2
    assert first_chunk_frames(0.01, 0.08, admitted=1, admitting=True) == 2
    assert first_chunk_frames(0.03, 0.08, admitted=1, admitting=False) == 2    # 3 steps outlast a frame
