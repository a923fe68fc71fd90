"""The text as sent, over a real socket (tiny dummy engine, stand-in aligner): the engine hears it without LLM markup,
while `words` and the barge-in split index it with its markup and in its own Unicode form (half-width kana); the
OpenAI route filters only when asked."""
import asyncio

import pytest

from qwen_tts_client import protocol as p
from test_aligner_gateway import barge_in, converse, start_server, words_of
from test_gateway_ws import assert_same_audio, audio_of

PIECES = ["<thi", "nk>Plan: greet them.</th", "ink>\n# Hi **th", "ere**, see [the", " docs](https://x.io/a) 👍", "🏽 now."]
SPOKEN = "\nHi there, see the docs  now."
RAW = dict(filter_think=False, filter_markdown=False, filter_emoji=False)


@pytest.fixture
def server(words_server):
    return words_server


def talk(srv, *contexts: tuple) -> list[tuple[list, list]]:
    """Each (context_id, pieces, settings) on a socket of its own, side by side (one batch): its messages and words."""
    async def speak(context_id: str, pieces: list[str], settings=None):
        first = p.Text(context_id, pieces[0], seed=6, **settings or {})
        log, _ = await converse(srv, first, *[p.Text(context_id, x) for x in pieces[1:]], p.End(context_id))
        return [m for _, m in log], words_of(log)

    async def run():
        return await asyncio.gather(*(speak(*c) for c in contexts))
    return asyncio.run(run())


def test_the_engine_hears_no_markup_and_words_index_the_text_sent(server):
    text = "".join(PIECES)
    (log, words), (plain, plain_words) = talk(server, ("m", PIECES), ("s", [SPOKEN]))   # the filtered text, as is
    assert [w for w, *_ in words] == ["Hi", "there", "see", "the", "docs", "now"]
    assert all(w == text[a:b] for w, _, _, a, b in words)
    assert text[words[1][3] - 2:words[1][4] + 2] == "**there**"
    assert_same_audio(audio_of(log), audio_of(plain))
    assert [w[0] for w in words] == [w[0] for w in plain_words]


def test_filters_switched_off_speak_and_index_the_text_as_sent(server):
    text = "".join(PIECES)
    (log, words), (plain, _) = talk(server, ("r", PIECES, RAW), ("rs", [SPOKEN]))
    assert [w for w, *_ in words][:2] == ["think>Plan", "greet"] and all(w == text[a:b] for w, _, _, a, b in words)
    assert len(audio_of(log)) != len(audio_of(plain)) or audio_of(log) != audio_of(plain)


@pytest.mark.parametrize("fraction, said", [(0.4, "**One** two, "), (0.6, "**One** two, _three")])
def test_barge_in_splits_the_text_sent_at_a_heard_words_end(server, fraction, said):
    first, more = "**One** two, _three_ four. ", "- five"

    def into_third_word(got):
        _, s, e, *_ = words_of([(0, m) for m in got])[2]
        return round((s + fraction * (e - s)) * 1000)
    got, cancelled = barge_in(server, f"b{fraction}", first, more, into_third_word)
    assert [(w, first[a:b]) for w, _, _, a, b in words_of([(0, m) for m in got])][:3] == \
        [("One", "One"), ("two", "two"), ("three", "three")]
    assert (cancelled.spoken_text, cancelled.unspoken_text) == (said.rstrip(", "), (first + more)[len(said.rstrip(", ")):])
    assert cancelled.spoken_until_char == len(cancelled.spoken_text)


def test_the_openai_route_reads_input_as_given_unless_asked(server):
    heard = []
    sequence = server.engine.sequence                # what the engine core admits, checked by the front end

    def spy(seq_id, request, handle):
        if "there" in request.text:              # not a straggler of an earlier test's context on this shared server
            heard.append(request.text)
        return sequence(seq_id, request, handle)
    server.engine.sequence = spy
    try:
        body = {"model": "qwen3-tts", "input": "**Hi** 😀 <think>x</think>there", "response_format": "pcm"}
        for extra in ({}, {"filter_markdown": True, "filter_emoji": True, "filter_think": True}):
            assert server.http.post("/v1/audio/speech", json=body | extra).status_code == 200
        bad = server.http.post("/v1/audio/speech", json=body | {"input": "😀", "filter_emoji": True})
        flag = server.http.post("/v1/audio/speech", json=body | {"filter_emoji": "yes"})
    finally:
        server.engine.sequence = sequence
    assert heard == [body["input"], "Hi  there"]
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, p.EMPTY_TEXT)
    assert flag.status_code == 400 and "filter_emoji" in flag.json()["error"]["message"]


def test_a_context_that_only_thinks_ends_without_audio_or_error(server):
    (log, words), (unclosed, unclosed_words) = talk(server, ("t", ["<think>Let me", " think about it.", "</think>"]),
                                                    ("u", ["Sure. <think>never", " closed"]))
    assert [type(m) for m in log] == [p.Done] and log[0].audio_ms == 0 and not words
    assert isinstance(unclosed[-1], p.Done) and [w for w, *_ in unclosed_words] == ["Sure"]


def test_half_width_kana_words_and_barge_in_stay_inside_the_text(server):
    """The report: words past the text's end, and a cancel answering that text never heard was spoken."""
    first, more = "新しいｶﾞｲﾄﾞﾌﾞｯｸを本日発売しました。", "詳しくはウェブサイトをご覧ください。"

    def into_third_word(got):
        _, s, e, *_ = words_of([(0, m) for m in got])[2]
        return round((s + 0.6 * (e - s)) * 1000)
    got, cancelled = barge_in(server, "kana", first, more, into_third_word)
    words = words_of([(0, m) for m in got])
    assert [w for w, *_ in words][:3] == ["新しい", "ｶﾞｲﾄﾞﾌﾞｯｸ", "を"] and all(w == first[a:b] for w, _, _, a, b in words)
    assert (cancelled.spoken_text, cancelled.spoken_until_char) == ("新しいｶﾞｲﾄﾞﾌﾞｯｸを", 13)
    assert cancelled.spoken_text + cancelled.unspoken_text == first + more
