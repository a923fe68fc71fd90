"""Streamed text in the ten languages the model speaks, through the engine's text intake with the real tokenizer:
scripts without spaces settle their ids a few characters behind the text (not at the next punctuation), a run with
no boundary at all is bounded, and what is fed is the whole text's tokenization (or, where the lookahead guessed,
the same characters segmented otherwise)."""
import functools
import random
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from bench.languages import LANGUAGES, pieces, sentences
from bench.stream_exactness import AUDIO, stream
from engine.api.request import SynthesisRequest
from engine.core.sequence import Sequence
from engine.core.text_intake import TextIntake
from engine.models.qwen3_tts.requests import ROLE
from engine.models.qwen3_tts.text_tokenizer import ANY_LOOKAHEAD, CJK_LOOKAHEAD, TextTokenizer
from helpers import examples

TOKENIZER = TextTokenizer.load()
EXACT = TextTokenizer.load(exact=True)
UNPUNCTUATED = {                    # one clause, no punctuation, no spaces where the script has none
    "zh": "今天天气很好我们一起去公园散步然后在湖边的咖啡馆喝杯咖啡聊聊最近的工作和生活",
    "ja": "今日はとても良い天気なので公園を散歩してから湖のそばのカフェでコーヒーを飲みましょう",
    "ko": "오늘은날씨가정말좋아서공원을산책한다음호숫가카페에서커피를마시면서이야기를나눠요",
}
NO_BOUNDARY = {                     # a run of letters of each script (or symbols) with no space, digit or mark in it
    "en": "supercalifragilisticexpialidocious" * 4, "de": "Donaudampfschifffahrtsgesellschaftskapitän" * 3,
    "fr": "anticonstitutionnellement" * 5, "ru": "превысокомногорассмотрительствующий" * 4,
    "pt": "pneumoultramicroscopicossilicovulcanoconiótico" * 3, "es": "electroencefalografistas" * 5,
    "it": "precipitevolissimevolmente" * 5, "symbols": "=-*#~" * 20, **UNPUNCTUATED,
}


def intake_steps(text: str, parts: list[str], tokenizer: TextTokenizer = TOKENIZER):
    """After each part, and after the end: (characters sent, characters settled, ids fed)."""
    intake = TextIntake(tokenizer, ROLE)
    seq = Sequence(0, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO)
    intake.add(seq)
    sent = 0
    for part in parts:
        intake.add(seq, part)
        intake.settle()
        sent += len(part)
        yield sent, sent - len("".join(seq.text.unsettled)), list(seq.text.feed)
    intake.add(seq, closed=True)
    intake.settle()
    yield sent, sent, list(seq.text.feed)


@pytest.mark.parametrize("lang", sorted(UNPUNCTUATED))
def test_chinese_japanese_korean_start_within_six_characters_without_punctuation(lang):
    text = UNPUNCTUATED[lang]
    steps = list(intake_steps(text, list(text)))
    start = next(sent for sent, _, fed in steps if fed)
    first = len(TOKENIZER.decode(TOKENIZER.encode(text)[:1]))
    assert start <= min(6, first + CJK_LOOKAHEAD), (lang, start)
    assert all(sent - settled <= CJK_LOOKAHEAD + 4 for sent, settled, _ in steps), lang   # the longest token behind


@pytest.mark.parametrize("lang", sorted(NO_BOUNDARY))
def test_a_run_with_no_boundary_settles_a_bounded_distance_behind(lang):
    text = NO_BOUNDARY[lang]
    steps = list(intake_steps(text, list(text)))
    bound = (CJK_LOOKAHEAD if lang in UNPUNCTUATED else ANY_LOOKAHEAD) + 12
    assert max(sent - settled for sent, settled, _ in steps) <= bound, lang
    assert TOKENIZER.decode(steps[-1][2]) == text[:steps[-1][1]]


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_streamed_ids_are_the_whole_texts_or_the_same_characters(lang):
    """1-2 characters a piece (Chinese, Japanese, Korean) or a word: at least 99% exactly the whole text's ids;
    the rest the same characters (bench/stream_exactness.py measures 1,000 sentences a language)."""
    rng, texts = random.Random(1), sentences(lang, 300, seed=1)
    exact, starts = 0, []
    for text in texts:
        ids, start, _ = stream(TextIntake(TOKENIZER, ROLE), pieces(text, lang, rng))
        whole = TOKENIZER.encode_prompt(ROLE, text)
        assert TOKENIZER.decode(ids) == TOKENIZER.decode(whole), text
        exact += ids == whole
        starts.append(start)
    assert exact >= 0.99 * len(texts), (lang, exact, len(texts))
    if lang in UNPUNCTUATED:
        assert sorted(starts)[len(starts) // 2] <= 6, lang


@pytest.mark.parametrize("lang", ["zh", "ja", "en"])
def test_streamed_as_a_qwen_llm_writes_it_every_language_starts_at_its_second_token(lang):
    """A Qwen LLM's tokens are the TTS tokenizer's: the first id settles once the second token comes, in Chinese and
    Japanese as in English (cut at random 1-2 characters, Chinese waits a piece longer than English's words)."""
    rng, starts = random.Random(2), {"chars": [], "tokens": []}
    for text in sentences(lang, 100, seed=2):
        for how in starts:
            parts = pieces(text, lang, rng, how)
            assert "".join(parts) == text
            ids, _, at = stream(TextIntake(TOKENIZER, ROLE), parts)
            assert ids == TOKENIZER.encode_prompt(ROLE, text) or how == "chars"
            starts[how].append(at)
    p90 = {how: sorted(at)[len(at) * 9 // 10] for how, at in starts.items()}
    assert p90["tokens"] <= 2, (lang, starts["tokens"])
    if lang == "zh":
        assert p90["chars"] > 2


def test_without_the_lookahead_cjk_boundaries_no_merge_can_cross_are_exact_on_random_strings():
    """The exact rule alone (no lookahead) settles CJK boundaries early only where no merge can cross them."""
    exact, rng = TextTokenizer.load(exact=True), random.Random(5)
    chars = sorted(set("".join(sentences("zh", 100) + sentences("ja", 100) + sentences("ko", 3))))
    early = 0
    for _ in range(600):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 30)))
        ids, start, _ = stream(TextIntake(exact, ROLE), list(text))
        assert ids == exact.encode_prompt(ROLE, text), text
        early += start is not None and start < len(text)
    assert early > 300


# what an LLM's reply in any language may carry besides its own script
ODD = ["ｶﾞｲﾄﾞ", "ガイド", "天気か\u3099", "\u1100\u1161\u11a8", "e\u0301", "n\u0303o", "😀", "👩\u200d👩\u200d👧",
       "❤\ufe0f", "iPhone 15", "мир", "，", "。", "\u3000", " ", "12", "3.5", "ＡＢＣ", "①", "（:", "」.", "—", "；"]
FORMS = [None, "NFC", "NFD", "NFKC"]


@functools.cache                    # drawn from each example: English's pool alone is 1,500 tries for its 3 sentences
def language_texts(lang: str):
    """Slices of the language's sentences mixed with other scripts, emoji and marks, in any normal form."""
    pool = sentences(lang, 30, seed=2)
    fragment = st.builds(lambda s, a, n: s[a:a + n], st.sampled_from(pool), st.integers(0, 80), st.integers(1, 12))
    form = st.sampled_from(FORMS)
    return st.builds(lambda parts, f: unicodedata.normalize(f, "".join(parts)) if f else "".join(parts),
                     st.lists(fragment | st.sampled_from(ODD), min_size=1, max_size=6), form)


def cut(text: str, sizes: list[int]) -> list[str]:
    """1-3 characters a piece, the sizes repeating."""
    parts, i = [], 0
    while i < len(text):
        parts.append(text[i:i + sizes[len(parts) % len(sizes)]])
        i += len(parts[-1])
    return parts


@pytest.mark.parametrize("lang", [lang if lang in ("en", "zh") else pytest.param(lang, marks=pytest.mark.slow)
                                  for lang in sorted(LANGUAGES)])        # a spaced and a CJK script in the inner loop
@settings(max_examples=examples(120), deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_streamed_in_any_cuts_the_exact_rule_feeds_the_whole_texts_ids_and_never_retracts(lang, data):
    text = data.draw(language_texts(lang))
    parts = cut(text, data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=8)))
    whole = EXACT.encode_prompt(ROLE, text)[3:]
    for sent, _, fed in intake_steps(text, parts, EXACT):
        assert fed == whole[:len(fed)], (text, sent)          # every id settled is the whole text's, for good
    assert fed == whole, text
