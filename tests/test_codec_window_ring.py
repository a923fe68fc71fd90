"""The codec decoder's transformer through its per-slot window ring (engine/kernels/ring_attention.py's torch code on
the CPU): streamed in any schedule (a clone's long reference primed in one call, then a frame a step through several
wraps of the ring; padding rows sharing the scratch slot) it gives the one-shot output of the same frames."""
import itertools

import pytest
import torch

from engine.kernels.registry import select
from engine.models.qwen3_tts.checkpoint import tiny_codec_config
from engine.models.qwen3_tts.codec.transformer import DecoderTransformer

FRAMES = 200


@pytest.fixture(scope="module")
def model():
    select(torch.device("cpu"))
    torch.manual_seed(0)
    m = DecoderTransformer(tiny_codec_config()["decoder_config"]).double()
    for p in m.parameters():
        p.data.normal_(0, 0.3)
    for s in m.modules():
        if hasattr(s, "state_specs"):
            s.allocate(6, torch.float64, torch.device("cpu"))
    x = torch.randn(3, FRAMES, m.input_proj.in_features, dtype=torch.float64)
    with torch.no_grad():
        return m, x, m(x, None)


def reset(m, slots):
    for s in m.modules():
        if hasattr(s, "state_specs"):
            s.reset(slots)


@pytest.mark.parametrize("schedule", [[1], [80, 1], [73, 1, 2, 1], [5, 1, 71, 1, 1, 75, 1]])
def test_streamed_through_the_ring_equals_one_shot(model, schedule):
    m, x, whole = model
    assert m.window < 80                                  # the schedules prime past the ring and wrap it
    slots = torch.tensor([4, 1, 2])
    reset(m, slots)
    out, start = [], 0
    with torch.no_grad():
        for n in itertools.cycle(schedule):
            if start >= FRAMES:
                break
            out.append(m(x[:, start:start + n], slots))
            start += n
    torch.testing.assert_close(torch.cat(out, 1), whole, rtol=0, atol=1e-12)


def test_padding_rows_on_the_scratch_slot_leave_the_real_rows_exact(model):
    m, x, whole = model
    reset(m, torch.arange(6))
    with torch.no_grad():
        out = [m(torch.cat([x[:2, t:t + 1], x[2:3, t:t + 1].expand(2, -1, -1)]), torch.tensor([0, 1, 5, 5]))[:2]
               for t in range(FRAMES)]
    torch.testing.assert_close(torch.cat(out, 1), whole[:2], rtol=0, atol=1e-12)
