"""The audio encoder's conv front ends (aligner/front_end.py) against today's cuDNN one, on random weights: the same
output in float64 and float32, and in bfloat16 as near float64's as cuDNN's own; on every chunk count of a conv pass
(1-64 chunks) with partial and empty chunks (the masks). Parity of the whole aligner with qwen-asr under each front end:
tests/test_aligner_parity.py and test_aligner_layout.py (their aligner fixtures run every front end)."""
import copy
import json

import pytest
import torch

from aligner import Aligner
from aligner.audio_encoder import AudioEncoder
from aligner.config import AlignerConfig, published_config, tiny_config
from aligner.front_end import FRONT_ENDS
from engine.models.weights import seed_weights

FASTER = [f for f in FRONT_ENDS if f != "cudnn"]


def encoder(config: dict, channels: int | None = None) -> AudioEncoder:
    cfg = copy.deepcopy(AlignerConfig.from_dict(config).audio)
    cfg.downsample_hidden = channels or cfg.downsample_hidden
    enc = AudioEncoder(cfg)
    seed_weights(enc, 0)
    return enc


def chunks_and_frames(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n log-mel chunks; frames: full, partial (odd and even counts), one frame, and empty slots."""
    g = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, 101, (n,), generator=g)
    frames[::3], frames[1::7], frames[2::11] = 100, 1, 0
    chunks = torch.randn(n, 128, 100, generator=g, dtype=torch.float64)
    return chunks * (torch.arange(100) < frames[:, None, None]), frames


@torch.no_grad()
def front_end_output(enc: AudioEncoder, how: str, dtype: torch.dtype, chunks, frames) -> torch.Tensor:
    enc = copy.deepcopy(enc).to(dtype)
    enc.pack(how)
    return enc.downsample(chunks.to(dtype), frames).double()


BOUNDARIES = (1, 2, 13, 31, 32, 33, 64)       # one, two, a conv pass's edges (CONV_SLOTS) and the largest


@pytest.mark.parametrize("how", FASTER)
def test_each_front_end_gives_cudnns_output_at_the_chunk_counts_that_bound_its_passes(how):
    same_as_cudnn(how, BOUNDARIES)


@pytest.mark.slow
@pytest.mark.parametrize("how", FASTER)
def test_each_front_end_gives_cudnns_output_on_every_chunk_count(how):
    same_as_cudnn(how, [n for n in range(1, 65) if n not in BOUNDARIES])


def same_as_cudnn(how: str, counts) -> None:
    enc = encoder(tiny_config(), channels=16)
    for n in counts:
        chunks, frames = chunks_and_frames(n, n)
        exact = front_end_output(enc, "cudnn", torch.float64, chunks, frames)
        assert exact.shape == (n, 13, enc.cfg.d_model) and exact.abs().max() > 0.1
        torch.testing.assert_close(front_end_output(enc, how, torch.float64, chunks, frames), exact, rtol=0,
                                   atol=1e-12)
        torch.testing.assert_close(front_end_output(enc, how, torch.float32, chunks, frames),
                                   front_end_output(enc, "cudnn", torch.float32, chunks, frames), rtol=1e-5, atol=1e-6)
        if n in (1, 2, 13, 32, 64):
            ours, cudnn = ((front_end_output(enc, h, torch.bfloat16, chunks, frames) - exact).abs() for h in (how, "cudnn"))
            assert ours.max() <= 1.25 * cudnn.max() and ours.mean() <= 1.1 * cudnn.mean(), (n, ours.max(), cudnn.max())


@pytest.mark.slow
@pytest.mark.parametrize("how", FASTER)
def test_each_front_end_at_the_published_size(how):
    """480 channels, 1024-wide output: float32 as cuDNN's."""
    enc = encoder(published_config())
    chunks, frames = chunks_and_frames(3, 0)
    torch.testing.assert_close(front_end_output(enc, how, torch.float32, chunks, frames),
                               front_end_output(enc, "cudnn", torch.float32, chunks, frames), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("how", FRONT_ENDS)
def test_each_front_end_reads_no_value_and_its_shapes_follow_its_inputs(how):
    """On meta tensors (no data): no host read and no data-dependent shape, as a CUDA graph's capture needs."""
    enc = encoder(tiny_config(), channels=16).to("meta")
    chunks, frames = torch.empty(32, 128, 100, device="meta"), torch.empty(32, dtype=torch.long, device="meta")
    assert front_end_output(enc, how, torch.float32, chunks, frames).shape == (32, 13, enc.cfg.d_model)


def test_an_unknown_front_end_is_refused_at_load():
    with pytest.raises(ValueError, match="front end must be one of"):
        Aligner.load(dummy="tiny", device="cpu", front_end="winograd")


@pytest.mark.slow
def test_aligner_bench_measures_each_front_end_in_one_run(tmp_path, monkeypatch):
    """--front-end a b c: each loaded in turn, its cost table and its timestamps against the first's, in one JSON."""
    from bench import aligner_bench
    path = tmp_path / "out.json"
    monkeypatch.setattr("sys.argv", ["aligner_bench.py", "--dummy", "tiny", "--tts-dummy", "tiny", "--device", "cpu",
                                     "--front-end", *FRONT_ENDS, "--concurrency", "--batches", "2", "--windows", "1",
                                     "--json", str(path)])
    aligner_bench.main()
    out = json.loads(path.read_text())
    assert out["front_end"] == "cudnn" and set(out["by_front_end"]) == set(FRONT_ENDS) and out["levels"] == []
    for how in FASTER:
        assert out["by_front_end"][how]["timestamps_as_first"] == 1.0          # float32: the same classes
        assert [row["batch"] for row in out["by_front_end"][how]["cost"]] == [2]
