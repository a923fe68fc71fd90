"""engine/models/qwen3_tts/codec against the official qwen-tts speech tokenizer (12 Hz), both on the same tiny random weights.

Tolerances: in float64 our decoder equals the official one, and streaming equals one-shot, to 1e-10 (observed
~1e-13), i.e. the same computation. In float32 we allow 1e-3 absolute on audio in [-1, 1]: these random weights
grow activations to ~100 before the output conv, where float32 resolution alone moves the audio by ~1e-4
(the official decoder in float32 is itself ~1e-4 away from its float64 result)."""
import copy
import itertools

import numpy as np
import pytest
import torch

from engine.models.qwen3_tts.codec import Codec
from engine.models.qwen3_tts.config import ASSETS
from engine.models.weights import seed_weights
from engine.models.qwen3_tts.checkpoint import tiny_codec_config

pytestmark = pytest.mark.slow                # parity with qwen-tts, in float64

FRAME = 1920
EXACT = dict(rtol=0, atol=1e-10)
FLOAT32 = dict(rtol=0, atol=1e-3)
SCHEDULES = {"ones": [1], "doubling": [1, 2, 4, 8, 16, 32], "irregular": [3, 7, 5, 1, 11, 2]}


@pytest.fixture(scope="module", autouse=True)
def inference_on_one_thread():
    # the CPU is shared with other jobs; two threads that wait on each other are much slower than one
    threads, grad = torch.get_num_threads(), torch.is_grad_enabled()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    yield
    torch.set_num_threads(threads)
    torch.set_grad_enabled(grad)


@pytest.fixture(scope="module")
def official():
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model
    model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**tiny_codec_config())).eval()
    seed_weights(model, 0)
    return model


@pytest.fixture(scope="module")
def official64(official):
    return copy.deepcopy(official).double()


def ours(official_model, max_streams: int = 0) -> Codec:
    dtype = next(official_model.parameters()).dtype
    codec = Codec(tiny_codec_config(), max_streams).to(dtype)
    codec.load_state_dict(official_model.state_dict(), strict=True)
    return codec


def random_codes(*shape: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (*shape, 16), generator=torch.Generator().manual_seed(seed))


def chunk_sizes(schedule: list[int], total: int):
    done = 0
    for size in itertools.cycle(schedule):
        if done >= total:
            return
        yield min(size, total - done)
        done += size


def test_state_dict_keys_are_the_checkpoint_keys(official):
    def shapes(module):
        return {name: tensor.shape for name, tensor in module.state_dict().items()}
    assert shapes(Codec(tiny_codec_config())) == shapes(official)


@pytest.mark.parametrize("frames", [40, 150])     # 150 > 2 * window (72): the sliding window matters
def test_decode_matches_official(official, official64, frames):
    codes = random_codes(frames, seed=frames)
    for model, tol in ((official, FLOAT32), (official64, EXACT)):
        want = model.decode(codes[None]).audio_values[0]
        got = ours(model).decoder.decode_all(codes)
        assert got.shape == (frames * FRAME,) and got.dtype == want.dtype
        torch.testing.assert_close(got, want, **tol)


def stream(decoder, codes: torch.Tensor, slots: torch.Tensor, schedule: list[int]) -> torch.Tensor:
    """Decode codes [B, T, 16] for streams that continue in `slots`, all B in each call, chunked by `schedule`."""
    out, start = [], 0
    for size in chunk_sizes(schedule, codes.shape[1]):
        out.append(decoder.decode(codes[:, start:start + size], slots))
        start += size
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("schedule", SCHEDULES.values(), ids=SCHEDULES.keys())
def test_streaming_equals_one_shot(official64, schedule):
    decoder = ours(official64, max_streams=4).decoder
    codes = random_codes(2, 100, seed=1)
    slots = torch.tensor([3, 1])
    decoder.decode(random_codes(1, 9, seed=2), slots[:1])     # stale state in slot 3 that reset must clear
    decoder.reset(slots)
    # stream 1 gets 6 frames ahead, so the batched calls mix RoPE positions and cache fill levels
    ahead = decoder.decode(codes[1:, :6], slots[1:])
    rest = stream(decoder, torch.stack([codes[0, :94], codes[1, 6:]]), slots, schedule)
    torch.testing.assert_close(rest[0], decoder.decode_all(codes[0, :94]), **EXACT)
    torch.testing.assert_close(torch.cat([ahead[0], rest[1]]), decoder.decode_all(codes[1]), **EXACT)


def test_streaming_float32(official):
    decoder = ours(official, max_streams=2).decoder
    codes = random_codes(2, 90, seed=3)
    got = stream(decoder, codes, torch.tensor([1, 0]), SCHEDULES["ones"])
    torch.testing.assert_close(got, decoder.decode(codes, None), **FLOAT32)


def test_prime_then_decode_equals_tail_of_concatenation(official64):
    decoder = ours(official64, max_streams=2).decoder
    context, generated = random_codes(30, seed=4), random_codes(50, seed=5)
    slot = torch.tensor([1])
    decoder.prime(context[None], slot)
    got = stream(decoder, generated[None], slot, [4])[0]
    # what the reference does for a voice clone: decode reference + generated codes, cut the reference samples
    want = official64.decode(torch.cat([context, generated])[None]).audio_values[0][30 * FRAME:]
    torch.testing.assert_close(got, want, **EXACT)


def test_streams_started_from_a_primed_state_equal_streams_primed_themselves(official):
    """A voice's primed state, computed once and copied into new slots (two voices in one copy), gives exactly the
    audio of a stream that decoded the reference itself."""
    decoder = ours(official, max_streams=5).decoder
    contexts, generated = [random_codes(n, seed=6 + n) for n in (30, 41)], random_codes(1, 20, seed=9)
    decoder.decode(random_codes(2, 7, seed=10), torch.tensor([0, 1]))         # stale state the load replaces
    states = [decoder.primed_state(c, torch.tensor([4])) for c in contexts]
    decoder.load(torch.tensor([0, 1]), [torch.cat(rows)[torch.tensor([1, 0])] for rows in zip(*states)])
    for slot, context in ((2, contexts[0]), (3, contexts[1])):
        decoder.reset(torch.tensor([slot]))
        decoder.prime(context[None], torch.tensor([slot]))
    got = stream(decoder, generated.expand(4, -1, -1), torch.tensor([1, 0, 2, 3]), [1, 3, 5])
    assert torch.equal(got[0], got[2]) and torch.equal(got[1], got[3])
    assert not torch.equal(got[0], got[1])


@pytest.mark.parametrize("samples", [12 * FRAME, 131 * FRAME + 1000])   # the second: > 250 frames at 25 Hz
def test_encode_matches_official(official, samples):
    from transformers import AutoFeatureExtractor
    from qwen_tts.inference.qwen3_tts_tokenizer import Qwen3TTSTokenizer
    tokenizer = Qwen3TTSTokenizer()
    tokenizer.model, tokenizer.device = official, torch.device("cpu")
    tokenizer.feature_extractor = AutoFeatureExtractor.from_pretrained(ASSETS / "models" / "1.7B-Base" / "speech_tokenizer")
    wav = (0.3 * np.random.default_rng(samples).standard_normal(samples)).astype(np.float32)
    want = tokenizer.encode(wav, sr=24000).audio_codes[0]
    got = ours(official).encoder.encode(torch.from_numpy(wav))
    assert got.shape == (-(-samples // FRAME), 16)
    assert got.unique().numel() > got.shape[0]         # not degenerate
    assert torch.equal(got, want)
