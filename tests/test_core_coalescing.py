"""Through a real engine core (its thread, its socket): what a front end sends in one event-loop turn reaches the
engine as one batch, each request's appends merged in order, a close or cancel after them; the audio is exactly the
whole text's."""
import asyncio

import numpy as np

from engine import Engine, SamplingParams, SynthesisRequest
from engine.api.commands import AppendText, CancelRequest, CloseText
from engine.api.interface import EngineInterface
from engine.core.sequence import Sequence
from gateway.engine_process import starts

TEXTS = ["Pieces of one sentence, merged.", "Another context, its pieces interleaved."]


def request(text: str, complete: bool) -> SynthesisRequest:
    return SynthesisRequest(text=text, voice="vivian", sampling=SamplingParams.greedy(), max_frames=10,
                            ignore_eos=True, text_complete=complete, non_streaming_text=False)


def test_a_turns_appends_reach_the_engine_merged_in_order_and_speak_as_the_whole_text():
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4).start()
    whole = [np.concatenate([c.codes for c in engine.submit(request(t, True)).iter_blocking()]) for t in TEXTS]
    batches, apply = [], engine.apply
    engine.apply = lambda commands: batches.append(commands) or apply(commands)

    async def run():
        client = starts.in_thread(engine)
        await client.start()
        assert isinstance(client, EngineInterface) and isinstance(engine, EngineInterface)   # one interface, two sides
        a, b, c = (client.submit(request("", False)) for _ in range(3))
        for i in range(0, 40, 2):                                # 2 characters each, interleaved
            for handle, text in ((a, TEXTS[0]), (b, TEXTS[1])):
                if text[i:i + 2]:
                    client.append_text(handle.id, text[i:i + 2])
        client.append_text(c.id, "Cancelled before a word.")
        client.close_text(a.id)
        client.append_text(a.id, " After the close: never spoken.")
        client.cancel(c.id)
        client.close_text(b.id)
        spoken = [[chunk async for chunk in handle] for handle in (a, b, c)]
        await client.close()
        return (a.id, b.id, c.id), spoken
    (ia, ib, ic), (got_a, got_b, got_c) = asyncio.run(run())
    assert len(batches) == 1
    seqs, commands = batches[0][:3], batches[0][3:]
    assert [type(s) for s in seqs] == [Sequence] * 3 and [s.id for s in seqs] == [ia, ib, ic]
    assert commands == [AppendText(ia, TEXTS[0]), AppendText(ib, TEXTS[1]), AppendText(ic, "Cancelled before a word."),
                        CloseText(ia), AppendText(ia, " After the close: never spoken."), CancelRequest(ic),
                        CloseText(ib)]
    np.testing.assert_array_equal(np.concatenate([c.codes for c in got_a]), whole[0])
    np.testing.assert_array_equal(np.concatenate([c.codes for c in got_b]), whole[1])
    assert got_c[-1].finish_reason == "cancelled"
