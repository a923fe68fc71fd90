"""The aligner's work per produced audio-second under the gateway's job flow (bench/aligner_work.py), counted on the
CPU: the counts are those of the rows a forward runs, the same on every run, every word settles once and in order,
and the work stays within what the job flow was brought to."""
import json

import numpy as np
import pytest

from aligner.audio_encoder import audio_tokens
from bench.aligner_work import Work, level


def test_a_batch_is_counted_as_its_forward_runs_it():
    """1.5 s and 2.5 s: 2 + 3 chunks in one 8-slot row, 20 + 33 audio tokens; text: each job's sequence (the audio's
    placeholders and two `<timestamp>`s a unit) in one 256-token row."""
    work = Work()
    c = work.batch([(np.zeros(36000, np.float32), ["hello", "world"]), (np.zeros(60000, np.float32), ["a"])])
    ids = [2 + audio_tokens(150) + 2 * 3, 2 + audio_tokens(250) + 3]
    assert (c["forwards"], c["jobs"], c["aligned_s"], c["slices"]) == (1, 2, 4.0, 6)
    assert (c["slots"], c["slots_used"], c["mel_frames"]) == (8, 5, 400)
    assert (c["encoder_tokens"], c["encoder_tokens_used"]) == (104, 53)
    assert (c["text_tokens"], c["text_tokens_used"]) == (256, sum(ids))
    assert work.counts == c


@pytest.fixture(scope="module")
def english():
    return level("en4x15", 32, 6.0, rtf=0.42, share=0.5)


def test_the_count_is_deterministic(english):
    assert level("en4x15", 32, 6.0, rtf=0.42, share=0.5) == english
    assert json.loads(json.dumps(english)) == english              # as --json writes it


@pytest.mark.parametrize("texts", ["en4x15", "zh"])
def test_every_word_settles_once_and_the_work_stays_bounded(english, texts):
    r = english if texts == "en4x15" else level(texts, 32, 6.0, rtf=0.42, share=0.5)
    assert r["words_settled"] == r["words"] and r["contexts"] >= 32
    assert 1.0 <= r["aligned_per_audio_s"] < 1.2
    assert r["slot_fill"] > 0.3 and r["text_token_fill"] > 0.3
    assert r["est_h100_device_ms_per_audio_s"] < 0.5


@pytest.mark.parametrize("texts", ["en4x15", "zh"])
def test_a_window_text_holds_every_unit_spoken_in_it_when_the_pace_swings(texts):
    """A speaker 40% faster and slower by turns: the text bound by the context's pace still leaves no unit spoken in
    a window out of its job."""
    r = level(texts, 32, 8.0, rtf=0.42, share=0.5, swing=0.4)          # (at 1.3x the pace, not 1.5x: 2 left out)
    assert r["spoken_left_out"] == 0 and r["words_settled"] == r["words"]
