"""Streaming commit logic and barge-in, with a deterministic stand-in aligner (an oracle of the true word times)."""
import numpy as np
import pytest

from aligner import Word, WordStream, spoken
from aligner.text import segment

FRAME = 1920                           # 80 ms at 24 kHz
WORD, GAP = 0.3, 0.1                   # the "speech": every unit lasts 0.3 s, 0.1 s apart


def timeline(text: str, language: str = "english", t0: float = 0.0, char0: int = 0) -> dict[int, tuple]:
    """The true (start, end) of every unit of `text` (keyed by its span start in the context), from t0."""
    return {u.start + char0: (t0 + GAP + i * (WORD + GAP), t0 + GAP + i * (WORD + GAP) + WORD)
            for i, u in enumerate(segment(text, language))}


def duration(truth: dict, t0: float) -> float:
    return max(e for _, e in truth.values()) + 0.2 - t0


def oracle(job, truth: dict) -> list[tuple]:
    """What a real aligner answers: spoken words at their times (from the window start); words whose end is not
    in the audio yet are crammed at the end of the window."""
    dur = len(job.audio) / 24000
    end = job.start + dur
    return [(dur, dur) if truth[u.start][1] > end + 1e-6 else
            (max(0.0, truth[u.start][0] - job.start), truth[u.start][1] - job.start) for u in job.units]


def speak(stream: WordStream, truth: dict, seconds: float, sent: list, lag: int = 0, close: bool = True) -> None:
    """Feed one utterance's audio in the engine's chunk schedule; align after every chunk. `lag`: chunks that
    arrive while a job is in flight (its result is applied late)."""
    total, frames, sizes = round(seconds * 24000 / FRAME), 0, iter([1, 2, 4, 8] + [16] * 1000)
    pending = []
    while frames < total:
        n = min(next(sizes), total - frames)
        frames += n
        stream.add_audio(np.zeros(n * FRAME, np.float32))
        if frames == total:
            stream.end_audio()
        if not pending and (job := stream.job()):
            pending.append([job, lag])
        while pending and (pending[0][1] == 0 or frames == total):
            job, _ = pending.pop()
            settled = stream.apply(job, oracle(job, truth))
            if not job.final:              # settled early only with `margin` of audio after the word
                assert all(w.end <= job.start + len(job.audio) / 24000 - job.margin + 1e-9 for w in settled)
            sent += settled
            if (job := stream.job()) is not None:
                pending.append([job, lag])
        for p in pending:
            p[1] -= 1


def check_words(sent: list[Word], text: str, truth: dict) -> None:
    spans = [(w.char_start, w.char_end) for w in sent]
    assert spans == sorted(set(spans)) and all(a <= b for (_, a), (b, _) in zip(spans, spans[1:]))   # once, in order
    assert [w.word for w in sent] == [text[a:b] for a, b in spans]
    starts = [w.start for w in sent]
    assert starts == sorted(starts)
    for w in sent:
        assert (w.start, w.end) == pytest.approx(truth[w.char_start], abs=1e-3)


@pytest.mark.parametrize("lag", [0, 1, 3])
def test_single_utterance_settles_every_word_once(lag):
    text = "Hello there, it's a fine day. We will see 3.5 things!"
    stream, sent = WordStream("english"), []
    stream.add_text(text)
    stream.close_utterance()
    truth = timeline(text)
    speak(stream, truth, duration(truth, 0.0), sent, lag)
    check_words(sent, text, truth)
    assert [w.char_start for w in sent] == [u.start for u in segment(text, "english")]   # covers the whole text
    assert not stream.owes_words and stream.job() is None


def test_streamed_text_waits_for_the_last_unit():
    stream, sent = WordStream("english", min_audio=0.5), []
    stream.add_text("one two thr")
    truth = timeline("one two three four")
    job = None
    for _ in range(16):                                # 1.28 s of audio, text still open: "thr" may grow
        stream.add_audio(np.zeros(FRAME, np.float32))
        while (job := stream.job()) is not None:
            sent += stream.apply(job, oracle(job, truth))
    assert [w.word for w in sent] == ["one", "two"]
    stream.add_text("ee four")
    stream.close_utterance()
    speak(stream, truth, duration(truth, 0.0) - 1.28, sent)
    check_words(sent, "one two three four", truth)
    assert [w.word for w in sent] == ["one", "two", "three", "four"]


def test_offsets_are_cumulative_across_flushes():
    parts = ["First part, with words. ", "Second 部分 here. ", "Third"]
    stream, sent, t0, truth = WordStream("chinese"), [], 0.0, {}
    for part in parts:                                 # all text first: utterances queue behind the speaking one
        stream.add_text(part)
        stream.close_utterance()
    char0 = 0
    for part in parts:
        piece = timeline(part, "chinese", t0, char0)
        truth.update(piece)
        seconds = duration(piece, t0)
        speak(stream, truth, seconds, sent)
        t0 += round(seconds * 24000 / FRAME) * FRAME / 24000
        char0 += len(part)
    text = "".join(parts)
    check_words(sent, text, truth)
    assert [w.word for w in sent] == [text[u.start:u.end] for u in segment(text, "chinese")]
    assert sent[-1].word == "Third" and sent[-1].start > 3.5        # after two utterances of audio


def test_truncated_utterance_settles_what_it_had():
    """The engine stopped an utterance before its text was closed: its words so far settle; text sent after the
    stop belongs to it but is never spoken; the next utterance starts after the flush."""
    stream, sent = WordStream("english"), []
    stream.add_text("alpha beta")
    truth = timeline("alpha beta")
    speak(stream, truth, duration(truth, 0.0), sent)
    stream.add_text(" dropped")
    stream.close_utterance()
    stream.add_text(" gamma")
    stream.close_utterance()
    t0 = round(duration(truth, 0.0) * 24000 / FRAME) * FRAME / 24000
    more = timeline(" gamma", "english", t0, len("alpha beta dropped"))
    speak(stream, more, duration(more, t0), sent)
    assert [w.word for w in sent] == ["alpha", "beta", "gamma"]
    assert sent[2].char_start == len("alpha beta dropped ") and sent[2].start > sent[1].end


def test_blank_utterance_settles_nothing():
    stream, sent = WordStream("english"), []
    stream.add_text(" ... ")
    stream.close_utterance()
    speak(stream, {}, 0.4, sent)
    assert sent == [] and not stream.owes_words


WORDS = [Word("Hello", 0.1, 0.5, 0, 5), Word("big", 0.6, 0.8, 7, 10), Word("world", 1.0, 1.4, 11, 16)]
TEXT = "Hello, big world. And more"


@pytest.mark.parametrize("played_s, until", [
    (0.0, 0), (0.05, 0), (0.3, 0),                     # before the first word, then half of it (not more)
    (0.31, 5), (0.5, 5), (0.55, 5),                    # more than half of "Hello"; its end; between words
    (0.7, 5), (0.71, 10), (0.8, 10),                   # "big" (0.6-0.8)
    (1.2, 10), (1.21, 16), (1.4, 16), (99.0, 16),      # "world" (1.0-1.4); beyond every word
])
def test_spoken_text(played_s, until):
    result = spoken(TEXT, WORDS, played_s)
    assert result.until == until
    assert result.text == TEXT[:until] and result.text + result.rest == TEXT


def test_bargein_counts_provisional_words_conservatively():
    stream = WordStream("english", margin=0.3, min_audio=0.5, opening=0)
    text = "one two three four"
    stream.add_text(text)
    truth = timeline(text)
    stream.add_audio(np.zeros(round(1.12 * 24000), np.float32))   # "three" ends at 1.2: not spoken yet
    job = stream.job()
    stream.apply(job, oracle(job, truth))
    assert [w.word for w in stream.words] == ["one", "two"]
    assert [w.word for w in stream.known_words()] == ["one", "two"]
    stream.add_audio(np.zeros(round(0.1 * 24000), np.float32))
    assert stream.job() is None                        # less than `step` of new audio
    stream.add_audio(np.zeros(round(0.08 * 24000), np.float32))
    assert stream.job() is None                        # less new audio than the unsettled tail it would re-align
    stream.add_audio(np.zeros(round(0.16 * 24000), np.float32))  # 1.46 s: "three" spoken, within `margin` of the end
    job = stream.job()
    stream.apply(job, oracle(job, truth))
    assert [w.word for w in stream.words] == ["one", "two"]
    assert [w.word for w in stream.known_words()] == ["one", "two", "three"]
    assert spoken(stream.text, stream.known_words(), 1.25).text == "one two three"
    assert spoken(stream.text, stream.known_words(), 1.1).text == "one two three"     # 0.2 of its 0.3 s played
    assert spoken(stream.text, stream.known_words(), 1.0).text == "one two"           # 0.1 of it


def test_jobs_are_paced_by_playback_and_new_audio():
    """A window is aligned when the player comes within `lookahead` of the settled words (with `step` of new
    audio), when it holds `batch` s of audio no job has seen, or when its audio is complete; not otherwise."""
    text = " ".join(f"w{i}" for i in range(40))
    stream, truth = WordStream("english", lookahead=1.0, batch=4.0, opening=0), timeline(text)
    stream.add_text(text)
    stream.close_utterance()
    stream.add_audio(np.zeros(3 * 24000, np.float32))
    job = stream.job(played_s=0.0)                           # nothing settled: the player needs words now
    assert [w.word for w in stream.apply(job, oracle(job, truth))] == [f"w{i}" for i in range(6)]   # <= 2.68
    assert stream.settled_time == pytest.approx(2.4)
    stream.add_audio(np.zeros(24000, np.float32))
    assert stream.due_in(0.5) == pytest.approx(0.9) and stream.job(played_s=0.5) is None
    job = stream.job(played_s=1.4)                           # the player is within `lookahead` of w5's end
    assert [w.word for w in stream.apply(job, oracle(job, truth))] == ["w6", "w7", "w8"]
    stream.add_audio(np.zeros(round(0.2 * 24000), np.float32))
    assert stream.job(played_s=3.0) is None                  # due, but less than `step` of new audio
    stream.add_audio(np.zeros(round(3.8 * 24000), np.float32))
    job = stream.job(played_s=0.0)                           # 4 s that no job has seen: aligned at once
    assert job is not None and not job.final
    stream.apply(job, oracle(job, truth))
    stream.add_audio(np.zeros(24000, np.float32))
    stream.end_audio()
    assert stream.job(played_s=0.0).final


def test_a_window_holds_the_text_its_audio_can_reach():
    """Units beyond what anyone could say in the window stay out of its job (their last unit then settles like
    any other); a final job takes all the rest."""
    text = " ".join(f"w{i}" for i in range(100))
    stream, truth = WordStream("english"), timeline(text)
    stream.add_text(text)
    stream.add_audio(np.zeros(24000, np.float32))
    job = stream.job()
    assert len(job.units) == 14 and job.whole                  # 4 + 10 per second
    stream.apply(job, oracle(job, truth))
    stream.end_audio()
    stream.close_utterance()
    assert len(stream.job().units) == 100 - len(stream.words)


def test_a_known_pace_bounds_the_window_text():
    """Once 2 s of settled words give the context's pace (characters per second of its audio, pauses up to 0.25 s
    counted), a window's text ends at 1.5x that pace: every word spoken in the window is in it, far fewer unspoken
    ones than under the fixed bound."""
    text = " ".join(f"w{i}" for i in range(100))
    stream, truth = WordStream("english"), timeline(text)
    stream.add_text(text)
    assert stream.pace() is None
    stream.add_audio(np.zeros(4 * 24000, np.float32))
    stream.apply(job := stream.job(), oracle(job, truth))
    assert len(stream.words) >= 7 and stream.pace() == pytest.approx(3 / 0.4)    # "wN " per 0.3 s and its gap
    stream.add_audio(np.zeros(4 * 24000, np.float32))
    job = stream.job(played_s=10.0)
    end = job.start + len(job.audio) / 24000
    spoken = [c for c, (s, e) in truth.items() if job.start <= s and e <= end]
    assert {u.start for u in job.units} >= set(spoken)
    seconds = len(job.audio) / 24000
    assert job.units[-1].end - job.units[0].start <= 8 + 1.5 * stream.pace() * seconds < 20 + 30 * seconds - 40
    assert len(job.units) <= 2 * len(spoken)            # the fixed bound: 38 units


def live(stream: WordStream, truth: dict, seconds: float, rtf: float, latency: float) -> tuple[float, list[float]]:
    """LiveWords' loop on a simulated clock: the engine's chunks come `rtf` x real time, a real-time player starts
    at the first, each job takes `latency`. -> (audio seconds aligned, lead of each word: how long before the
    player reaches its end it settled)."""
    arrivals, frames, sizes = [], 0, iter([1, 2, 4, 8] + [16] * 1000)
    while frames < round(seconds * 24000 / FRAME):
        n = min(next(sizes), round(seconds * 24000 / FRAME) - frames)
        frames += n
        arrivals.append((0.02 + frames * 0.08 * rtf, n))
    now, first, aligned, leads, running = 0.0, arrivals[0][0], 0.0, [], None
    while arrivals or running or stream.owes_words:
        played = max(0.0, now - first)
        wake = [t for t in (arrivals[0][0] if arrivals else None, running and running[1]) if t]
        if not running and now >= first and stream.due_in(played) > 0:
            wake.append(now + stream.due_in(played))
        now = max(min(wake), now + 1e-6)
        while arrivals and arrivals[0][0] <= now:
            stream.add_audio(np.zeros(arrivals.pop(0)[1] * FRAME, np.float32))
            if not arrivals:
                stream.end_audio()
        if running and running[1] <= now:
            leads += [first + w.end - now for w in stream.apply(running[0], oracle(running[0], truth))]
            running = None
        if not running and (job := stream.job(max(0.0, now - first))) is not None:
            aligned, running = aligned + len(job.audio) / 24000, (job, now + latency)
    return aligned, leads


@pytest.mark.parametrize("rtf, latency", [(0.1, 0.05), (0.25, 0.05), (0.25, 0.1)])
def test_each_second_is_aligned_about_once_and_settles_before_playback(rtf, latency):
    """Streams generated 4-10x faster than real time: every word is known before a real-time player reaches its
    end, while the aligner sees each second of audio about once (re-aligned unsettled tails included; a stream
    of 1 s pays most for its first job, at 0.5 s)."""
    generated = aligned = 0.0
    for n in (3, 8, 20, 45, 80):
        text = " ".join(["voice", "agents", "talk", "a", "lot"] * 16)[:n * 5].rsplit(" ", 1)[0]
        stream, truth = WordStream("english"), timeline(text)
        stream.add_text(text)
        stream.close_utterance()
        seconds = round(duration(truth, 0.0) * 24000 / FRAME) * FRAME / 24000
        got, leads = live(stream, truth, seconds, rtf, latency)
        assert len(stream.words) == len(truth) and min(leads) >= 0
        assert got / seconds < 1.6
        generated, aligned = generated + seconds, aligned + got
    assert aligned / generated < 1.25


def test_service_batches_in_order_within_the_audio_bound_and_stops():
    """Queued jobs go out in order, in forwards of at most `max_batch_seconds` of audio (a forward delays the
    engine's next step); the job that did not fit leads the next forward; close() stops the worker."""
    from aligner import AlignmentService

    forwards = []

    class Recorder:
        def align_units(self, items, rate, turn=None):
            forwards.append([len(audio) // rate for audio, _ in items])
            return [[(0.0, float(len(audio) // rate))] * len(units) for audio, units in items]

    service = AlignmentService(Recorder(), max_batch=8, max_batch_seconds=5.0)
    job = lambda s: (np.zeros(s * 24000, np.float32), ["a"])
    futures = [service.submit(*job(s)) for s in (1, 2, 2, 3, 1, 1, 4, 6)]
    service.start()
    assert [f.result(5) for f in futures] == [[(0.0, float(s))] for s in (1, 2, 2, 3, 1, 1, 4, 6)]
    assert forwards == [[1, 2, 2], [3, 1, 1], [4], [6]]      # a job longer than the bound goes alone
    service.close()
    assert not service.thread.is_alive()


def test_service_gathers_jobs_while_their_due_times_allow():
    """A forward waits up to `gather` s for more jobs, never past `gather_margin` before its earliest due time,
    and takes them most urgent first; jobs due at once (or soon) go out at once. (A minute's gather: a wrong wait
    times out, a loaded machine never.)"""
    import time

    from aligner import AlignmentService

    forwards = []

    class Recorder:
        def align_units(self, items, rate, turn=None):
            forwards.append([len(audio) // rate for audio, _ in items])
            return [[(0.0, 1.0)] * len(units) for audio, units in items]

    service = AlignmentService(Recorder(), max_batch=8, max_batch_seconds=60.0, gather=60, gather_margin=0.5)
    service.start()
    job = lambda s: (np.zeros(s * 24000, np.float32), ["a"])
    far = time.monotonic() + 3600
    gathered = [service.submit(*job(1), far), service.submit(*job(2), far), service.submit(*job(3), time.monotonic())]
    assert all(f.result(30) for f in gathered) and forwards == [[3, 1, 2]]   # until one was due
    assert service.submit(*job(4), time.monotonic() + 0.5).result(30)      # no time to gather
    assert service.submit(*job(5)).result(30) and forwards[1:] == [[4], [5]]
    service.close()


@pytest.mark.slow                                   # a forward per slice count
def test_a_forward_takes_as_many_turns_as_its_slices_need_and_gives_the_same_times():
    """The engine's turns carry budgets: the aligner queues the slices of its forward that fit (at least one) in
    each, waits for the next turn for the rest, and its times are those of the forward run in one go."""
    import threading

    from aligner import Aligner, AlignmentService
    from engine.core.side_work import SideWork

    aligner, rng = Aligner.load(dummy="tiny", device="cpu"), np.random.default_rng(0)
    jobs = [((0.1 * rng.standard_normal(s * 24000)).astype(np.float32), list(words))
            for s, words in ((2, "abc"), (1, "d"))]
    expected = aligner.align_units(jobs, 24000)
    slices = len(aligner.model.encoder) + len(aligner.model.text)
    gate, stop = SideWork(), threading.Event()
    service = AlignmentService(aligner, side_work=gate).start()
    service.costs.fixed_s, service.costs.per_gflop_s = 0.0, 1.0            # a slice costs its GFLOP in seconds
    budget = [None]                                           # None: what the waiting slice asks for

    def engine():
        while not stop.is_set():
            if gate.wanted is not None:
                gate.give(None, 5.0, gate.wanted if budget[0] is None else budget[0])
    thread = threading.Thread(target=engine)
    thread.start()
    try:
        for size, turns in ((None, slices), (float("inf"), 1)):
            budget[0], before = size, dict(service.stats)
            futures = [service.submit(*job) for job in jobs]
            assert [f.result(60) for f in futures] == expected
            forwards = service.stats["batches"] - before["batches"]      # (one, unless the second job came late)
            assert service.stats["turns"] - before["turns"] == turns * forwards
    finally:
        stop.set()
        thread.join(5)
        service.close()


def test_a_jobs_audio_stays_as_it_was_while_more_arrives_and_the_window_moves():
    """Jobs view the window's buffer without copying it: appends (and the buffer's growth) and the cut after
    settled words never change the audio of a job in flight, and the next window starts at the cut."""
    rng = np.random.default_rng(0)
    stream, truth = WordStream("english", min_audio=0.5), timeline("one two three four five six")
    stream.add_text("one two three four five six")
    pieces = [rng.standard_normal(FRAME * k).astype(np.float32) for k in (1, 2, 4, 8, 16, 16, 16)]
    for p in pieces[:4]:
        stream.add_audio(p)
    job = stream.job()
    seen = job.audio.copy()
    assert np.array_equal(seen, np.concatenate(pieces[:4]))
    words = stream.apply(job, oracle(job, truth))
    for p in pieces[4:]:
        stream.add_audio(p)
    assert np.array_equal(job.audio, seen)
    cut = round(words[-1].end * 24000)
    assert np.array_equal(stream.job().audio, np.concatenate(pieces)[cut:])


def test_a_forced_job_aligns_the_audio_come_since_the_last_one_and_the_words_known_cover_it():
    """A barge-in's answer: a job for the audio received, ready or not; the known words then cover its audio up to
    GUARD before its end (all of it once final), and with no new audio there is nothing to force."""
    from aligner.stream import GUARD
    stream = WordStream("english")
    stream.add_text("one two three four")
    stream.add_audio(np.zeros(7200, np.float32))                       # 0.3 s: short of the opening's 0.5 s
    assert stream.job() is None and stream.covered_s == 0.0
    job = stream.job(force=True)
    assert job is not None and len(job.audio) == 7200
    stream.apply(job, [(0.0, 0.05), (0.06, 0.1), (0.3, 0.3), (0.3, 0.3)])
    assert abs(stream.covered_s - (0.3 - GUARD)) < 1e-9
    assert [w.word for w in stream.known_words()] == ["one", "two"]
    assert stream.job(force=True) is None                              # nothing new came
    stream.add_audio(np.zeros(2400, np.float32))
    stream.close_utterance()
    stream.end_audio()
    job = stream.job()
    stream.apply(job, [(0.0, 0.1), (0.12, 0.2)])
    assert abs(stream.covered_s - (job.start + len(job.audio) / 24000)) < 1e-9
