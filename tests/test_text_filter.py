"""The streaming markup filter: what each filter drops, the same result whatever the pieces, and every kept
character mapped back to its place in the client's text."""
import pytest
from hypothesis import example, given, settings, strategies as st

from gateway.client_text import ClientText
from gateway.offset_map import OffsetMap
from gateway.text_filter import Filters, TextFilter
from qwen_tts_client import protocol as p

ALL = Filters()
LLM = ("<think>The user wants a list.\nPlan it.</think>\n\n# Packing list\n\nHere is **what** to _bring_:\n"
       "- a `tent` and ~~two~~ one [sleeping bag](https://shop.example/bag?id=3) 👍🏽\n* snake_case 2 * 3 \\*stars\\*\n"
       "1. first 🇯🇵 👩‍👩‍👧 1️⃣\n```python\nx = a * b_c\n```\n> quoted **bold**\n---\nDone!")
SPOKEN = ("\n\nPacking list\n\nHere is what to bring:\na tent and two one sleeping bag \nsnake_case 2 * 3 *stars*\n"
          "1. first   1\nx = a * b_c\nquoted bold\nDone!")


def whole(text: str, filters: Filters = ALL) -> tuple[str, TextFilter]:
    f = TextFilter(filters)
    return f.feed(text, final=True), f


@pytest.mark.parametrize("text, spoken", [
    (LLM, SPOKEN),
    ("**重要**なお知らせ：新しい[ガイド](https://e.x/a)を発売😀。", "重要なお知らせ：新しいガイドを発売。"),
    ("<think>never closed, never spoken", ""),
    ("a <b> c < d, </think> e", "a <b> c < d,  e"),
    ("## **Título** — ¿qué? «oui» Привет_мир", "Título — ¿qué? «oui» Привет_мир"),
    ("<thi", "<thi"),                                 # a cut marker left at the end is text
])
def test_each_marker_is_dropped_and_its_text_kept(text, spoken):
    assert whole(text)[0] == spoken


def test_each_filter_switches_alone():
    text = "<think>x</think>**a** 😀"
    assert whole(text, Filters(True, False, False))[0] == "**a** 😀"
    assert whole(text, Filters(False, True, False))[0] == "<think>x</think>a 😀"
    assert whole(text, Filters(False, False, True))[0] == "<think>x</think>**a** "
    assert Filters(False, False, False).apply(text) == text and not Filters(False, False, False).any


def test_a_marker_is_held_only_until_it_is_known():
    f, out, held = TextFilter(ALL), [], []
    for x in ["Hello *", "*there", "** <", "think>quiet</th", "ink>now", " ok"]:
        out.append(f.feed(x))
        held.append(f.held)
    assert out == ["Hello ", "there", " ", "", "now", " ok"] and held == ["*", "", "<", "</th", "", ""]


texts = st.lists(st.sampled_from(["<think>", "</think>", "<th", "**", "*", "_", "__", "~~", "`", "```", "```py\n",
                                  "\n", "# ", "- ", "> ", "[", "](", "](http://x.y/z)", ")", "]", "!", "\\", "\\*",
                                  "---\n", "😀", "👍🏽", "\u200d", "\ufe0f", "🇯🇵", "1", "a", "語", " ", "snake_case",
                                  "ｶﾞ", "é"]) | st.text(max_size=3), max_size=24).map("".join)


@pytest.mark.slow                                   # hypothesis
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(texts, st.sampled_from([ALL, Filters(True, False, False), Filters(False, True, True)]))
@example(LLM, ALL)
def test_pieces_split_at_every_position_give_the_whole_texts_result(text, filters):
    spoken, f = whole(text, filters)
    assert all(text[f.map.origin(i)] == c for i, c in enumerate(spoken))           # each kept character's place
    assert [f.map.origin(i) for i in range(len(spoken))] == sorted({f.map.origin(i) for i in range(len(spoken))})
    for cut in range(len(text) + 1):
        g = TextFilter(filters)
        assert g.feed(text[:cut]) + g.feed(text[cut:], final=True) == spoken
        assert (g.map.starts, g.map.origins) == (f.map.starts, f.map.origins)
    g, pieces = TextFilter(filters), [text[i:i + 2] for i in range(0, len(text), 2)]
    assert "".join(g.feed(x) for x in pieces) + g.feed("", final=True) == spoken


def test_held_text_is_bounded():
    f = TextFilter(ALL)
    f.feed("[link](" + "x" * 5000)
    assert len(f.held) < 2100
    f = TextFilter(ALL)
    f.feed("<think>" + "y" * 10000 + "</thi")
    assert len(f.held) <= 7
    for run in ("*", "_", "~", "`", "😀", "👍🏽\u200d"):              # runs of markers: each a bounded pattern
        f = TextFilter(ALL)
        assert "".join(f.feed(run * 3000) for _ in range(3)).strip("\u200d") == "" and len(f.held) < 200


def test_offsets_map_spans_and_prefixes_back():
    m = OffsetMap()
    m.add(2, 4), m.add(8, 3), m.add(11, 2)             # "bold" at 2, then 8..13 contiguous
    assert (m.starts, m.origins) == ([0, 4], [2, 8])
    assert m.span(0, 4) == (2, 6) and m.span(3, 6) == (5, 10) and m.end(0) == 0 and m.end(9) == 13
    text = ClientText(p.Text("c", ""))
    said = [text.add(x) for x in ["**bo", "ld** wor", "ds"]] + [text.close()]
    assert "".join(said) == "bold words" and text.whole() == "**bold** words"
    assert text.span(0, 4) == (2, 6) and text.slice(*text.span(5, 10)) == "words" and text.until(4) == 6
    plain = ClientText(p.Text("c", "", filter_think=False, filter_markdown=False, filter_emoji=False))
    assert plain.add("**x**") == "**x**" and plain.span(0, 5) == (0, 5) and plain.filter is None
