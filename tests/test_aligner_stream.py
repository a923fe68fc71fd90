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
                assert all(w.end <= job.start + len(job.audio) / 24000 - stream.margin + 1e-9 for w in settled)
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
    assert not stream.pending and stream.job() is None


def test_streamed_text_waits_for_the_last_unit():
    stream, sent = WordStream("english"), []
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
    assert sent == [] and not stream.pending


WORDS = [Word("Hello", 0.1, 0.5, 0, 5), Word("big", 0.6, 0.8, 7, 10), Word("world", 1.0, 1.4, 11, 16)]
TEXT = "Hello, big world. And more"


@pytest.mark.parametrize("played, until", [
    (0.0, 0), (0.05, 0), (0.3, 0),                     # before the first word, then half of it (not more)
    (0.31, 5), (0.5, 5), (0.55, 5),                    # more than half of "Hello"; its end; between words
    (0.7, 5), (0.71, 10), (0.8, 10),                   # "big" (0.6-0.8)
    (1.2, 10), (1.21, 16), (1.4, 16), (99.0, 16),      # "world" (1.0-1.4); beyond every word
])
def test_spoken_text(played, until):
    result = spoken(TEXT, WORDS, played)
    assert result.until == until
    assert result.text == TEXT[:until] and result.text + result.rest == TEXT


def test_bargein_counts_provisional_words_conservatively():
    stream = WordStream("english", margin=0.45)
    text = "one two three four"
    stream.add_text(text)
    truth = timeline(text)
    stream.add_audio(np.zeros(round(1.3 * 24000), np.float32))   # "three" ends at 1.2: spoken, not settled
    job = stream.job()
    stream.apply(job, oracle(job, truth))
    assert [w.word for w in stream.words] == ["one", "two"]
    assert [w.word for w in stream.known_words()] == ["one", "two"]   # "three" ends within GUARD of the audio end
    stream.add_audio(np.zeros(round(0.1 * 24000), np.float32))
    job = stream.job()
    assert job is None                                 # less than `step` of new audio
    stream.add_audio(np.zeros(round(0.2 * 24000), np.float32))
    job = stream.job()
    stream.apply(job, oracle(job, truth))
    assert [w.word for w in stream.words] == ["one", "two"]
    assert [w.word for w in stream.known_words()] == ["one", "two", "three"]
    assert spoken(stream.text, stream.known_words(), 1.25).text == "one two three"
    assert spoken(stream.text, stream.known_words(), 1.1).text == "one two three"     # 0.2 of its 0.3 s played
    assert spoken(stream.text, stream.known_words(), 1.0).text == "one two"           # 0.1 of it


def test_jobs_follow_the_playback_horizon():
    """With a horizon (a player's position plus lookahead), a window is aligned only once the settled words end
    before it, or when the window reaches max_window; a complete utterance is aligned at once."""
    text = "one two three four five six seven eight nine"
    stream, truth = WordStream("english", max_window=3.0), timeline(text)
    stream.add_text(text)
    stream.close_utterance()
    stream.add_audio(np.zeros(24000, np.float32))
    job = stream.job(horizon=1.5)
    assert [w.word for w in stream.apply(job, oracle(job, truth))] == ["one"]          # 0.4 <= 1.0 - 0.32
    assert stream.settled_time == pytest.approx(0.4)
    stream.add_audio(np.zeros(24000, np.float32))
    assert stream.job(horizon=0.4) is None                 # the player is far from the settled words
    job = stream.job(horizon=0.41)
    assert [w.word for w in stream.apply(job, oracle(job, truth))] == ["two", "three", "four"]
    stream.add_audio(np.zeros(3 * 24000, np.float32))      # the window passes max_window: aligned anyway
    assert stream.job(horizon=0.0) is not None
    stream.end_audio()
    assert stream.job(horizon=0.0).final
