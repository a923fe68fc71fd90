"""The characters NFC can no longer change in a text that is still arriving, against NFC itself on the whole text."""
import unicodedata

from hypothesis import example, given, settings, strategies as st

from engine.models.qwen3_tts.nfc_boundaries import boundary_after, boundary_before, settled_span
from helpers import examples

NFC = lambda s: unicodedata.normalize("NFC", s)      # noqa: E731
# starters that compose (Latin, kana, Hangul L/LV, Indic, Greek), what they compose with, and stable ones
ATOMS = list("aeEoMnAkuΩιカかしハはウ가하각각世最。、ｶﾞ1 -") + [
    "\u0301", "\u0300", "\u0302", "\u0308", "\u0323", "\u0316", "\u0345", "\u3099", "\u309a", "\u0cc6", "\u0cc2",
    "\u0cd5", "\u0b47", "\u0b3e", "\u0bc6", "\u0bbe", "\u0dd9", "\u0dcf", "\u1100", "\u1161", "\u11a8", "\u212b",
    "\uf900", "\u0344", "é", "ẹ", "が", "\u0f73", "\u0f74", "\u0327", "\u0338", "=", "😀", "\u200d", "\ufe0f"]
TEXT = st.lists(st.sampled_from(ATOMS), max_size=10).map("".join)


@settings(max_examples=examples(800), deadline=None, derandomize=True, database=None)
@example("天気か", 2, "\u3099")
@example("こe\u0316", 1, "\u0301")     # the acute reaches past the grave below to the "e": it is not settled
@example("\u0cc6\u0cc2", 0, "\u0cd5")
@example("\u0cc6\u0cc2", 1, "")          # U+0CC2 composes with the sign before it
@example("最é", 0, "\u0323")             # the dot below sorts before the acute: "ẹ" and an acute
@example("a\u0f74\u0f73", 2, "")          # U+0F73 begins with a mark that sorts before U+0F74
@given(TEXT, st.integers(0, 12), TEXT)
def test_a_settled_span_is_what_nfc_makes_of_it_whatever_follows(text, start, more):
    """NFC(text + more) keeps the span as it is, split from what comes before and after it."""
    span = settled_span(text, start, 8)
    if span:
        end = start + len(span)
        assert NFC(text + more) == NFC(text[:start]) + span + NFC(text[end:] + more), (text, start, more)


def test_hanzi_and_unvoiced_kana_close_a_span_and_voiceable_ones_do_not():
    assert all(map(boundary_after, ["最", "。", "ア", "안"]))
    assert not any(map(boundary_after, ["か", "ウ", "하", "e", "é", "が"]))
    assert not boundary_before("\u3099") and not boundary_before("\u1161") and boundary_before("ﾞ")
    assert settled_span("根据最", 2, 8) == "最" and settled_span("天気か", 2, 8) == ""
    assert settled_span("天気かは", 2, 8) == "か" and settled_span("根据最\u0301", 2, 8) == ""
