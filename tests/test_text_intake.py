"""Text intake at O(new text): streamed text tokenized a tail at a time gives, at every step, the ids the whole
text's tokenization commits; the engine's tokenizer work per append does not grow with the text."""
import pytest
from hypothesis import example, given, settings, strategies as st

from test_text_tokenizer import ATOMS

from engine import Engine, SynthesisRequest
from bench.stream_exactness import AUDIO
from engine.core.sequence import Sequence, Status
from engine.core.text_intake import TextIntake
from engine.models.qwen3_tts.requests import ROLE
from engine.models.qwen3_tts.text_tokenizer import TextTokenizer

TOKENIZER = TextTokenizer.load(exact=True)      # the exact rule: no lookahead inside long runs
PIECES = ATOMS + ["<|im_", "start|>", "end|>", "|>", "tts_pad>", "<|im_start|>assistant\n", "   ", "\u0301\u0323",
                  "e\u0301\u0301", "한", "\u1100\u1161", "你好", "，", "Ω\u0345", "\u212b", "\r\n \n"]
TEXTS = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=24).map("".join)


def whole_text_commit(text: str, closed: bool) -> tuple[list[int], list[int]]:
    """What the engine committed before: the whole text tokenized at every append."""
    ids, (control, plain) = TOKENIZER.encode_prompt(ROLE, text), TOKENIZER.split_control(ROLE)
    final = len(control) + TOKENIZER.final_count(plain + text, closed)
    return ids[:3], ids[3:max(final, 3)]


def pieces_of(text: str, cuts: list[int]) -> list[str]:
    cuts = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


@pytest.mark.slow                                   # hypothesis
@settings(max_examples=300, deadline=None)
@example([("中文Aa", [3])], [])        # "中文|A", then "中文Aa": one piece (the letter patterns backtrack over "A")
@example([("adon't中文00\U00011380Aa", [12])], [])    # Python's Unicode tables lack U+11380: the old rule is not monotone
@example([("aa<tts_00:\U0002ee5eA", [11])], [])       # ":" then a character the regex reads as a symbol: no cut between
@given(st.lists(st.tuples(TEXTS, st.lists(st.integers(0, 99), max_size=12)), min_size=1, max_size=4),
       st.lists(st.booleans(), max_size=14))
def test_tail_tokenization_commits_what_the_whole_text_does_at_every_step(streams, settles):
    """Several streams settle in one batch; pieces settle one at a time or a few together, as they pile up per step."""
    intake = TextIntake(TOKENIZER, ROLE)
    seqs = [Sequence(i, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO) for i in range(len(streams))]
    plans = [pieces_of(text, cuts) for text, cuts in streams]
    sent = ["" for _ in seqs]
    steps = max(map(len, plans)) + 1
    for step in range(steps):
        for i, (seq, pieces) in enumerate(zip(seqs, plans)):
            if step < len(pieces):
                intake.add(seq, pieces[step])
                sent[i] += pieces[step]
            elif step == len(pieces):
                intake.add(seq, closed=True)
        if step == steps - 1 or settles[step:step + 1] != [False]:
            intake.settle()
            for seq, text, (whole, _) in zip(seqs, sent, streams):
                role_ids, feed = whole_text_commit(text, seq.text.closed)
                final = TOKENIZER.encode_prompt(ROLE, whole)[3:]
                got = seq.text
                assert got.role_ids == role_ids and got.feed == final[:len(got.feed)], text     # never revised
                assert len(got.feed) >= len(feed), text     # nothing held back that the whole text settles
    assert [seq.text.role_ids + seq.text.feed for seq in seqs] == [TOKENIZER.encode_prompt(ROLE, text) for text in sent]


class CountingTokenizer:
    """The engine's `tokenizers.Tokenizer`, counting the characters and the texts it is given."""

    def __init__(self, tok):
        self.tok, self.chars, self.texts = tok, 0, 0

    def encode(self, text, **kwargs):
        return self.encode_batch([text], **kwargs)[0]

    def encode_batch(self, texts, **kwargs):
        self.chars, self.texts = self.chars + sum(map(len, texts)), self.texts + len(texts)
        return self.tok.encode_batch(texts, **kwargs)


def test_engine_text_work_per_append_does_not_grow_with_the_text():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=1)      # not started: the test drains its inbox
    counting = engine.model.tokenizer._tok = CountingTokenizer(engine.model.tokenizer._tok)
    sentence = "Streamed text, four characters at a time: tokens arrive as an LLM writes them. "
    text = (sentence * 70)[:5000]
    handle = engine.submit(SynthesisRequest(text="", text_complete=False))
    engine.thread.drain()
    work = []
    for i in range(0, len(text), 4):
        before = counting.chars
        engine.append_text(handle.id, text[i:i + 4])
        engine.thread.drain()
        work.append(counting.chars - before)
    engine.close_text(handle.id)
    engine.thread.drain()
    seq = engine.thread.seqs[handle.id]
    assert seq.text.role_ids + seq.text.feed == TOKENIZER.encode_prompt(ROLE, text)
    first, last = sum(work[:100]) / 100, sum(work[-100:]) / 100
    assert len(work) == 1250 and last <= first + 4, (first, last)
    assert max(work) <= 32                        # the word being written and the new piece


def test_appends_queued_together_are_tokenized_once_after_the_inbox():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2)
    counting = engine.model.tokenizer._tok = CountingTokenizer(engine.model.tokenizer._tok)
    streamed = engine.submit(SynthesisRequest(text="", text_complete=False))
    for piece in ["One, ", "two, ", "three. ", "Four"]:
        engine.append_text(streamed.id, piece)
    whole = engine.submit(SynthesisRequest(text="A new request behind the appends."))
    engine.thread.drain()
    assert counting.texts == 2                    # every piece after the inbox: one text a stream, not one a piece
    assert [engine.thread.seqs[h.id].text.num_text_ids > 0 for h in (streamed, whole)] == [True, True]


def test_a_text_the_tokenizer_refuses_ends_its_stream_only():
    intake = TextIntake(TOKENIZER, ROLE)
    bad, good = (Sequence(i, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO) for i in range(2))
    intake.add(bad, "Hi \ud800 there")                 # a lone surrogate: JSON can carry one
    intake.add(good, "Hello there. ")
    assert [(seq.id, error.code) for seq, error in intake.settle()] == [(bad.id, "invalid_request")]
    assert (good.text.role_ids, good.text.feed) == whole_text_commit("Hello there. ", False)


def test_a_running_stream_far_ahead_settles_new_text_later_with_the_same_ids_and_never_runs_dry():
    tokenizer = TextTokenizer.load(exact=True)
    counting = tokenizer._tok = CountingTokenizer(tokenizer._tok)
    intake = TextIntake(tokenizer, ROLE)
    seq = Sequence(0, SynthesisRequest(text_complete=False), None, 0, ROLE, AUDIO)
    text = "Streamed text, four characters at a time: tokens arrive faster than they are spoken. " * 4
    for n, i in enumerate(range(0, len(text), 4)):             # a step every 3 appends, one id fed a step
        intake.add(seq, text[i:i + 4])
        intake.settle()
        if n % 3 == 2 and seq.text.num_text_ids:
            seq.status = Status.RUNNING
            assert seq.text.ready() and seq.text.next_id(0, 1) is not None
    assert counting.texts < len(text) / 4 / 3                  # most appends waited for the feed to run low
    intake.add(seq, closed=True)
    intake.settle()
    assert seq.text.role_ids + seq.text.feed == TOKENIZER.encode_prompt(ROLE, text)
