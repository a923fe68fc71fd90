"""Word spans and the barge-in split over texts of all ten languages' scripts in any Unicode form: half- and
full-width forms, NFC/NFD/NFKC/NFKD, stray combining marks, emoji and ZWJ sequences, digits inside Japanese."""
import unicodedata

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from aligner import Word, WordStream, spoken
from aligner.text import kept, segment
from helpers import examples

pytest.importorskip("nagisa")
pytest.importorskip("soynlp")

LANGUAGES = ["auto", "chinese", "english", "japanese", "korean", "german", "french", "russian", "portuguese",
             "spanish", "italian"]
WORDS = ["我爱北京天安门", "今天天气很好", "hello", "don't", "3.5", "今日は良い天気ですね", "ガイドブック", "ｶﾞｲﾄﾞﾌﾞｯｸ",
         "２０２６年", "ＡＢＣ", "안녕하세요", "한국어", "Größe", "Straße", "l'été", "Noël", "Привет", "мир",
         "ação", "não", "llegará", "mañana", "¿qué?", "perché", "più", "İstanbul", "株式会社", "㍿", "①", "ﬁ", "x²"]
ODD = ["\u0301", "\u0308", "\u3099", "ﾞ", "ﾟ", "\u200d", "\ufe0f", "\u20e3", "👍", "👍🏽", "👩‍👩‍👧", "🇯🇵", "1️⃣",
       "ᄀ", "ᅡ", "ᆨ", "ㄱ", "ㅏ", "。", "、", "！", "，", "「", "」", "—", "…", "*", "#", " ", "  ", "\n", "\u3000"]
FORMS = [None, "NFC", "NFD", "NFKC", "NFKD"]
MIXED = "新しいｶﾞｲﾄﾞﾌﾞｯｸを本日発売しました。詳しくはウェブサイトをご覧ください。"
CASES = settings(max_examples=examples(150), deadline=None, derandomize=True, database=None)

texts = st.builds(lambda parts, form: unicodedata.normalize(form, "".join(parts)) if form else "".join(parts),
                  st.lists(st.sampled_from(WORDS + ODD) | st.characters(codec="utf-8"), max_size=16),
                  st.sampled_from(FORMS))


def wordy(ch: str) -> bool:
    """A letter or digit that is one in every normal form: it belongs to a word."""
    return kept(ch) and all(any(kept(c) for c in unicodedata.normalize(f, ch)) for f in ("NFC", "NFKC"))


def check_spans(text: str, spans: list[tuple[int, int]]) -> None:
    assert all(0 <= a < b <= len(text) for a, b in spans)                          # inside, non-empty
    assert all(b <= a2 for (_, b), (a2, _) in zip(spans, spans[1:]))               # in order, apart
    assert all(any(kept(c) for c in unicodedata.normalize("NFKC", text[a:b])) for a, b in spans)
    covered = {i for a, b in spans for i in range(a, b)}
    assert all(i in covered for i, ch in enumerate(text) if wordy(ch))             # every letter is in a word


@CASES
@given(texts, st.sampled_from(LANGUAGES))
@example(MIXED, "auto")
@example(unicodedata.normalize("NFD", MIXED), "japanese")
@example(unicodedata.normalize("NFD", "El tren llegará mañana."), "spanish")
def test_segment_spans_cover_the_words_in_order(text, language):
    units = segment(text, language)
    check_spans(text, [(u.start, u.end) for u in units])
    assert all(u.text for u in units)


def test_half_width_and_decomposed_forms_keep_their_words():
    assert [MIXED[u.start:u.end] for u in segment(MIXED, "auto")][:3] == ["新しい", "ｶﾞｲﾄﾞﾌﾞｯｸ", "を"]
    nfd = unicodedata.normalize("NFD", "llegará mañana")
    assert [nfd[u.start:u.end] for u in segment(nfd, "spanish")] == unicodedata.normalize("NFD", "llegará mañana").split()
    assert [u.text for u in segment(nfd, "spanish")] == ["llegará", "mañana"]      # the aligner reads whole letters
    assert [(u.start, u.end) for u in segment("1️⃣ 👩‍👩‍👧 ok", "english")] == [(0, 3), (10, 12)]


def stand_in(job) -> list[tuple[float, float]]:
    """Spans proportional to the units' lengths over the window's audio."""
    dur, n = len(job.audio) / 24000, sum(len(u.text) + 1 for u in job.units)
    edges = np.cumsum([0] + [len(u.text) + 1 for u in job.units]) * dur / max(n, 1)
    return [(float(a), float(b) - 0.01) for a, b in zip(edges[:-1], edges[1:])]


def stream_words(text: str, language: str, cuts: list[int]) -> list[Word]:
    """`text` sent in pieces, 0.1 s of audio per character after each, aligned as jobs come due; then the end."""
    stream, words, bounds = WordStream(language), [], sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    for a, b in zip(bounds, bounds[1:]):
        stream.add_text(text[a:b])
        stream.add_audio(np.zeros(2400 * (b - a), np.float32))
        while job := stream.job(played_s=1e9):
            words += stream.apply(job, stand_in(job))
    stream.close_utterance()
    stream.add_audio(np.zeros(2400, np.float32))
    stream.end_audio()
    while job := stream.job():
        words += stream.apply(job, stand_in(job))
    return words


@CASES
@given(texts, st.sampled_from(LANGUAGES), st.lists(st.integers(0, 60), max_size=8),
       st.integers(0, 8000).map(lambda ms: ms / 1000))     # (no floats strategy: nagisa sets flush-to-zero)
@example(MIXED, "auto", [5, 20], 2.5)
def test_streamed_words_and_the_barge_in_split_index_the_text(text, language, cuts, played):
    words = stream_words(text, language, cuts)
    check_spans(text, [(w.char_start, w.char_end) for w in words])
    assert all(w.word == text[w.char_start:w.char_end] for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    ends, until = {0} | {w.char_end for w in words}, 0
    for t in sorted([0.0, played] + [w.end for w in words]):
        said = spoken(text, words, t)
        assert said.text + said.rest == text and said.until == len(said.text)
        assert said.until in ends and said.until >= until                         # at a heard word's end
        until = said.until
    assert spoken(text, words, 1e9).until == (words[-1].char_end if words else 0)
