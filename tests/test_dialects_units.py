"""The dialects' mappings without a server: word times to ElevenLabs' characters, words to Cartesia's tokens,
ElevenLabs' close_context rule."""
from gateway.dialects.char_alignment import CharTimes
from gateway.dialects.elevenlabs import ContextState, ElevenLabs
from gateway.dialects.settings import tokens
from qwen_tts_client import protocol as p

TEXT = "Hello there, how are you?"


def test_words_become_every_character_with_times_that_restart_per_message_and_sum_to_the_words():
    times = CharTimes()
    times.text = TEXT
    first = times.words(p.Words("c", ["Hello", "there"], [0.1, 0.5], [0.4, 0.9], [0, 6], [5, 11]))
    second = times.words(p.Words("c", ["how", "are", "you"], [1.0, 1.2, 1.4], [1.1, 1.3, 1.6], [13, 17, 21],
                                 [16, 20, 24]))
    tail = times.tail()
    assert "".join(first[0] + second[0] + tail[0]) == TEXT                  # every character once, in order
    assert first[1][:2] == [100, 160] and first[1][5] == 400                # "Hello" spread over 0.1-0.4 s
    clock, absolute = 0, []
    for chars, starts, durations in (first, second, tail):                  # how a client sums them (Pipecat)
        absolute += [clock + s for s in starts]
        clock += starts[-1] + durations[-1]
    assert absolute[13] == 1000 and absolute[21] == 1400 and clock == 1600  # "how", "you", the end
    assert second[1][0] == 0 and tail == (["?"], [0], [0])                 # from the previous message's end


def test_cartesia_words_keep_their_punctuation_as_its_tokens_do():
    assert tokens(TEXT, [0, 6, 13, 17, 21], [5, 11, 16, 20, 24]) == ["Hello", "there,", "how", "are", "you?"]
    assert tokens('"Well," she said.', [1, 8, 12], [5, 11, 16]) == ['"Well,"', "she", "said."]


def test_close_context_ends_flushed_text_and_stops_the_rest():
    dialect = ElevenLabs.__new__(ElevenLabs)
    flushed, unflushed = ContextState(CharTimes(), flushed=True), ContextState(CharTimes())
    assert dialect._close("a", flushed) == [p.End("a")]                      # LiveKit's and Pipecat's end of a turn
    assert dialect._close("a", flushed) == [p.Cancel("a")]                   # Pipecat's interruption after it
    assert dialect._close("b", unflushed) == [p.Cancel("b")]                 # an interruption mid-turn
    assert dialect._close("gone", None) == []


def test_an_empty_text_on_an_open_context_is_its_keepalive_and_a_flush_still_flushes():
    dialect = ElevenLabs.__new__(ElevenLabs)
    dialect.multi, dialect.contexts = True, {"a": ContextState(CharTimes())}
    dialect.contexts["a"].times.text = "Hello"
    assert dialect.from_client('{"text": "", "context_id": "a"}') == [p.Keepalive("a")]     # Pipecat's, mid-turn
    assert dialect.from_client('{"text": "", "context_id": "a", "flush": true}') == [p.Flush("a")]
    assert dialect.contexts["a"].times.text == "Hello" and dialect.contexts["a"].flushed
