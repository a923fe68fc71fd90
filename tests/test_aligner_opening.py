"""An utterance's opening words, which a player reaches soonest: its first windows are aligned from 0.5 s of audio
and settle words up to GUARD before their audio's end, so they are known before they are played even where the
engine runs at half real time (as at 512 contexts)."""
import numpy as np
import pytest

from aligner.stream import WordStream
from test_aligner_stream import FRAME, duration, live, timeline


def leads(rtf: float, latency: float, **options) -> np.ndarray:
    out = []
    for n in (3, 8, 20, 45, 80):
        text = " ".join(["voice", "agents", "talk", "a", "lot"] * 16)[:n * 5].rsplit(" ", 1)[0]
        stream, truth = WordStream("english", **options), timeline(text)
        stream.add_text(text)
        stream.close_utterance()
        seconds = round(duration(truth, 0.0) * 24000 / FRAME) * FRAME / 24000
        out += live(stream, truth, seconds, rtf, latency)[1]
        assert len(stream.words) == len(truth)
    return np.array(out)


def test_the_opening_words_are_ahead_of_a_player_at_half_real_time():
    assert leads(0.45, 0.1).min() >= 0
    assert (leads(0.45, 0.1, opening=0) < 0).any()            # without the opening rule: the first words late


@pytest.mark.parametrize("rtf, latency", [(0.45, 0.2), (0.6, 0.1)])
def test_the_opening_rule_never_makes_the_worst_word_later(rtf, latency):
    assert np.percentile(leads(rtf, latency), 1) >= np.percentile(leads(rtf, latency, opening=0), 1)
