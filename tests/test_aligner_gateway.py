"""Word timestamps through the gateway: `words` events on a real socket (before the audio's playback end),
barge-in answers, and an aligner that fails or stalls (no words, one `alignment_unavailable`, the audio goes on)."""
import asyncio
import time

import pytest
import websockets

from aligner import Aligner, Word, spoken
from aligner.text import segment
from engine import Engine
from engine.core.clock import REAL_CLOCK
from fake_clock import FakeClock
from gateway.limits import Limits
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from qwen_tts_client import protocol as p
from stand_in_aligner import StandIn


def start_server(aligner, clock=REAL_CLOCK, aligner_timeout=30.0, max_contexts=4):
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    config = GatewayConfig(max_contexts_per_socket=max_contexts, max_frames=20, aligner_timeout=aligner_timeout,
                           context_timeout=600, limits=Limits(max_outbound_seconds=600))   # past a fake clock's leaps
    return ServerThread(engine, config, aligner=aligner, clock=clock).start()


@pytest.fixture
def server(words_server):
    return words_server


async def converse(srv, *messages, until=p.ends_context):
    """Send `messages`, then collect (arrival time, message) until `until(message)`."""
    async with websockets.connect(srv.ws_url) as ws:
        ready = p.parse_server(await ws.recv())
        for msg in messages:
            if isinstance(msg, p.Text) and msg.voice is None and msg.seed is not None:
                msg.voice = ready.voices[0]
            await ws.send(p.encode(msg))
        log = []
        while not log or not until(log[-1][1]):
            log.append((time.monotonic(), p.parse_server(await asyncio.wait_for(ws.recv(), 30))))
        return log, ws


def words_of(log):
    return [(w, s, e, a, b) for _, m in log if isinstance(m, p.Words)
            for w, s, e, a, b in zip(m.words, m.start, m.end, m.char_start, m.char_end)]


def playback_end(log) -> float:
    """When a real-time player of the log's audio ends: it starts at the first chunk and waits for a late one. Wall
    time (a fake clock held to the audio received would make the bound hold by construction); a loaded machine's
    engine, slower than real time, delays the player instead of failing the test."""
    end = None
    for t, m in log:
        if isinstance(m, p.Audio):
            end = (t if end is None else max(end, t)) + len(m.data) / 2 / 24000
    return end


def test_words_cover_the_text_in_order_before_playback_ends(server):
    parts = ["Hello there, my friend. ", "How are you today?", " Fine, thanks 2.5 times."]
    log, _ = asyncio.run(converse(server, p.Text("w", parts[0], seed=1), p.Text("w", parts[1]), p.Flush("w"),
                                  p.Text("w", parts[2]), p.End("w")))
    text = "".join(parts)
    words = words_of(log)
    assert [(a, b) for *_, a, b in words] == [(u.start, u.end) for u in segment(text, "auto")]
    assert all(w == text[a:b] for w, _, _, a, b in words)
    assert [s for _, s, *_ in words] == sorted(s for _, s, *_ in words)
    kinds = [type(m).__name__ for _, m in log if not isinstance(m, p.Audio)]
    assert kinds[-1] == "Done" and kinds.count("Flushed") == 1
    flushed_at = next(i for i, (_, m) in enumerate(log) if isinstance(m, p.Flushed))
    samples_before = sum(len(m.data) // 2 for _, m in log[:flushed_at] if isinstance(m, p.Audio))
    second = [w for w in words if w[3] >= len(parts[0] + parts[1])]
    assert second and second[0][1] >= samples_before / 24000            # cumulative times across the flush
    assert not [m for _, m in log[flushed_at:] if isinstance(m, p.Words) and m.char_start[0] < len(parts[0] + parts[1])]
    for t, m in log:
        if isinstance(m, p.Words):                                     # known before a real-time player ends
            assert t <= playback_end(log)
    assert max(e for _, _, e, *_ in words) <= log[-1][1].audio_ms / 1000 + 1e-3
    deadline = time.monotonic() + 10                 # the core reports every 0.1 s: one may predate the last job's end
    while "tts_aligner_queued_jobs 0" not in (metrics := server.http.get("/metrics").text):
        assert time.monotonic() < deadline, metrics
        time.sleep(0.1)
    assert "tts_aligner_busy_seconds" in metrics
    value = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines() if line.startswith("tts_aligner")}
    assert value["tts_aligner_jobs"] >= value["tts_aligner_batches"] >= 1
    assert value["tts_aligner_queued_seconds"] >= 0 and value["tts_aligner_turn_wait_seconds"] >= 0
    assert value["tts_aligner_overdue_jobs"] >= 1 and value["tts_aligner_overdue_seconds"] > 0   # the opening's job
    assert value["tts_aligner_spans"] >= len(words) and 0 <= value["tts_aligner_spans_past_audio"]
    assert value["tts_aligner_refused_contexts"] >= value["tts_aligner_refused_behind_contexts"] == 0
    assert value["tts_aligner_used"] >= 0
    assert value["tts_aligner_turns_returned"] == value["tts_aligner_turn_host_seconds"] == 0   # it takes no turns
    assert "tts_engine_side_turns_withdrawn 0" in metrics


def barge_in(srv, context_id, first, more, played_ms=lambda got: None):
    """Speak `first` to its `flushed` (every word of it settled), send `more`, cancel with played_ms(messages so
    far): (messages, cancelled)."""
    async def run():
        async with websockets.connect(srv.ws_url) as ws:
            ready = p.parse_server(await ws.recv())
            for msg in (p.Text(context_id, first, voice=ready.voices[0], seed=2), p.Flush(context_id)):
                await ws.send(p.encode(msg))
            got = [p.parse_server(await asyncio.wait_for(ws.recv(), 30))]
            while not isinstance(got[-1], p.Flushed):
                got.append(p.parse_server(await asyncio.wait_for(ws.recv(), 30)))
            await ws.send(p.encode(p.Text(context_id, more)))
            await ws.send(p.encode(p.Cancel(context_id, played_ms(got))))
            while not isinstance(msg := p.parse_server(await asyncio.wait_for(ws.recv(), 30)), p.Cancelled):
                got.append(msg)
            return got, msg
    return asyncio.run(run())


@pytest.mark.parametrize("fraction", [0.4, 0.6])
def test_cancel_reports_the_spoken_text(server, fraction):
    """Cancelled mid-word: the word counts once more than half of it was played."""
    first, more = "one two three four five six. ", "seven eight"

    def into_third_word(got):
        _, s, e, *_ = words_of([(0, m) for m in got])[2]
        return round((s + fraction * (e - s)) * 1000)
    got, cancelled = barge_in(server, "c", first, more, into_third_word)
    said = spoken(first + more, [Word(*x) for x in words_of([(0, m) for m in got])], cancelled.played_ms / 1000)
    assert (cancelled.spoken_text, cancelled.spoken_until_char, cancelled.unspoken_text) == \
        (said.text, said.until, said.rest)
    assert cancelled.spoken_text == ("one two" if fraction < 0.5 else "one two three")


def test_cancel_before_any_audio_spoke_nothing(server):
    _, cancelled = barge_in(server, "z", "one two. ", "three", lambda got: 0)
    assert (cancelled.spoken_text, cancelled.spoken_until_char, cancelled.unspoken_text) == ("", 0, "one two. three")


def assert_only_the_words_lost(srv, log, code=p.ALIGNMENT_UNAVAILABLE):
    errors = [m for _, m in log if isinstance(m, p.Error)]
    assert [(e.code, e.context_id) for e in errors] == [(code, "f")]
    assert not words_of(log) and isinstance(log[-1][1], p.Done)
    assert sum(len(m.data) for _, m in log if isinstance(m, p.Audio)) // 2 == round(log[-1][1].audio_ms * 24)
    assert srv.gateway.aligner is not None


def test_a_failing_aligner_costs_only_the_words(server):
    log, _ = asyncio.run(converse(server, p.Text("f", "this will fail now", seed=3), p.End("f")))
    assert_only_the_words_lost(server, log)


def test_a_stalled_aligner_costs_only_the_words_once_the_timeout_passes():
    aligner, clock = StandIn(), FakeClock()
    srv = start_server(aligner, clock, aligner_timeout=0.5)

    async def run():
        talk = asyncio.create_task(converse(srv, p.Text("f", "this will slow now", seed=3), p.End("f")))
        await asyncio.to_thread(aligner.stalled.wait, 30)
        async with asyncio.timeout(30):
            while not talk.done():                  # past the timeout, whenever its wait started
                clock.advance(1.0)
                await asyncio.sleep(0.01)
        return (await talk)[0]

    try:
        assert_only_the_words_lost(srv, asyncio.run(run()))
    finally:
        aligner.release.set()
        srv.stop()


def test_no_word_timestamps_when_not_asked(server):
    log, _ = asyncio.run(converse(server, p.Text("n", "quiet words here", seed=4, word_timestamps=False), p.End("n")))
    assert not words_of(log) and isinstance(log[-1][1], p.Done)


@pytest.mark.slow                                   # an engine and the aligner's model of its own
def test_dummy_aligner_end_to_end():
    """The real model (tiny random weights): its times are arbitrary, so words settle at the end."""
    srv = start_server(Aligner.load(dummy="tiny", device="cpu"))
    try:
        text = "Real model words, in order."
        log, _ = asyncio.run(converse(srv, p.Text("r", text, seed=5), p.End("r")))
        assert [(a, b) for *_, a, b in words_of(log)] == [(u.start, u.end) for u in segment(text, "english")]
        assert isinstance(log[-1][1], p.Done)
    finally:
        srv.stop()


def test_a_context_refused_at_its_first_text_leaves_no_alignment_task(server):
    import gc
    from aligner import LiveWords

    def running():
        return sum(1 for o in gc.get_objects() if type(o) is LiveWords and not o.task.done())

    async def main():
        async with websockets.connect(server.ws_url) as ws:
            await ws.recv()
            for i in range(3):                      # refused by the engine's input checks (busy is refused alike)
                await ws.send(p.encode(p.Text(f"bad-{i}", "Hello there.", voice="nobody")))
                msg = p.parse_server(await asyncio.wait_for(ws.recv(), 10))
                assert isinstance(msg, p.Error) and msg.code == p.UNKNOWN_VOICE
            async with asyncio.timeout(10):      # one that ends does so at once; a leaked one waits for the socket
                while running() > before:
                    await asyncio.sleep(0.05)

    before = running()
    asyncio.run(main())


class HeldFirst(StandIn):
    """The stand-in whose first batch with a unit 'one' waits for `release` (then fails if `fails`): a context's
    words lag its audio."""

    def __init__(self, fails: bool = False):
        super().__init__()
        self.fails = fails

    def align_units(self, items, sample_rate, turn=None):
        if not self.stalled.is_set() and any("one" in units for _, units in items):
            self.stalled.set()
            self.release.wait(60)
            if self.fails:
                raise RuntimeError("held, then failed")
        return super().align_units(items, sample_rate, turn)


def barge_in_lagging(release_after: float | None, fails: bool = False):
    """A context's first second of audio received while its words are held; a cancel at 900 ms played, then more
    text, a flush and a second cancel (ignored while the first's answer waits); the hold released `release_after` s
    later (None: never), then the next turn started on the socket's one context allowed. -> (messages before
    `cancelled`, cancelled, its wait in s)."""
    aligner = HeldFirst(fails)
    srv = start_server(aligner, max_contexts=1)

    async def run():
        async with websockets.connect(srv.ws_url) as ws:
            ready = p.parse_server(await ws.recv())
            for msg in (p.Text("b", "one two three four five six seven eight", voice=ready.voices[0], seed=4),
                        p.Flush("b")):
                await ws.send(p.encode(msg))
            got, samples = [], 0
            while samples < 24000:
                got.append(msg := p.parse_server(await asyncio.wait_for(ws.recv(), 30)))
                samples += len(msg.data) // 2 if isinstance(msg, p.Audio) else 0
            assert await asyncio.to_thread(aligner.stalled.wait, 30) and not words_of([(0, m) for m in got])
            await ws.send(p.encode(p.Cancel("b", 900)))
            sent = time.monotonic()
            for msg in (p.Text("b", " nine"), p.Flush("b"), p.Cancel("b", 1200),   # an LLM's tokens still coming
                        p.Text("n", "the next turn", voice=ready.voices[0], seed=5, end=True)):
                await ws.send(p.encode(msg))
            if release_after is not None:
                asyncio.get_running_loop().call_later(release_after, aligner.release.set)
            last = {}                                               # each context's last message, in either order
            while len(last) < 2:
                got.append(msg := p.parse_server(await asyncio.wait_for(ws.recv(), 30)))
                if p.ends_context(msg):
                    last[msg.context_id] = (msg, time.monotonic() - sent)
                    aligner.release.set()                           # the next turn's words are not held
            assert isinstance(last["n"][0], p.Done) and last["n"][0].audio_ms > 0
            assert isinstance(last["b"][0], p.Cancelled)
            return [m for m in got[:-1] if m.context_id == "b" and m is not last["b"][0]], *last["b"]
    try:
        return asyncio.run(run())
    finally:
        aligner.release.set()
        srv.stop()


def test_a_cancel_past_the_words_known_waits_for_the_words_of_the_audio_played():
    """At the cancel no word is known (the aligner holds the context's first window): the audio stops, and the answer
    comes once the audio received is aligned: the words played, not none."""
    got, cancelled, waited = barge_in_lagging(0.3)
    assert waited >= 0.3 and not [m for m in got if isinstance(m, p.Error)]
    words = [Word(*x) for x in words_of([(0, m) for m in got])]         # those settled meanwhile, sent first
    assert cancelled.played_ms == 900 and cancelled.spoken_until_char > 0
    assert cancelled.spoken_text + cancelled.unspoken_text == "one two three four five six seven eight"
    assert cancelled.spoken_text.endswith(tuple("one two three four five six seven eight".split()))
    assert all(w.char_end <= cancelled.spoken_until_char for w in words if w.end <= 0.9)
    assert all(w.char_start >= cancelled.spoken_until_char for w in words if w.start > 0.9)


def test_a_cancel_whose_words_never_come_is_answered_after_its_wait_with_the_words_known():
    from aligner.live import BARGE_IN_WAIT_S
    got, cancelled, waited = barge_in_lagging(None)
    assert BARGE_IN_WAIT_S <= waited < BARGE_IN_WAIT_S + 5
    assert (cancelled.spoken_text, cancelled.spoken_until_char) == ("", 0)       # audio past the words known: none


def test_a_cancel_whose_alignment_fails_meanwhile_is_answered_from_the_words_known_at_the_cancel():
    got, cancelled, waited = barge_in_lagging(0.2, fails=True)
    assert waited >= 0.2 and not [m for m in got if isinstance(m, p.Error)]      # no alignment_unavailable
    assert (cancelled.spoken_text, cancelled.spoken_until_char) == ("", 0)
