"""The aligner's static-shape forward (rows of fixed size, buckets, as CUDA graphs replay it) against a plain
forward of one item at a time with no padding at all."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from aligner import Aligner, layout
from aligner.audio_encoder import CHUNK, TOKENS, audio_tokens, chunk_tokens
from aligner.features import log_mels, mel_shape
from aligner.forward import Forward
from aligner.front_end import FRONT_ENDS
from aligner.layout import ROWS, TEXT_TOKENS, WIDTHS, Fit, bucket
from aligner.text import segment
from tests.graph_stand_in import stand_in_graphs


@pytest.fixture(scope="module", params=FRONT_ENDS)
def aligner(request):
    """Tiny random weights, sharpened so that the timestamp classes vary from word to word; each conv front end."""
    torch.manual_seed(0)
    a = Aligner.load(dummy="tiny", device="cpu", seed=3, front_end=request.param)
    t = a.model.thinker
    with torch.no_grad():
        t.lm_head.weight[60:] = 0
        t.lm_head.weight[:60] *= 4
        t.model.embed_tokens.weight[a.cfg.timestamp_token] *= 0.02
        for layer in t.model.layers:
            layer.self_attn.q_norm.weight.mul_(4)
            layer.self_attn.k_norm.weight.mul_(4)
    return a


class CausalKV:
    def attend(self, layer, q, k, v, scale):
        q, k, v = (x.transpose(0, 1)[None] for x in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)[0].transpose(0, 1)


def plain_classes(model, mel: torch.Tensor, ids: list[int]) -> list[int]:
    """One item, every tensor exactly its size: chunks through the convs (a tail chunk zero padded, an audio under
    1 s alone), the audio's tokens in 104-token windows, the text model over the sequence."""
    enc, t = model.thinker.audio_tower, model.thinker
    frames = mel.shape[1]
    pieces = [F.pad(mel[:, s:s + CHUNK], (0, CHUNK - min(CHUNK, frames - s)) if frames >= CHUNK else (0, 0))
              for s in range(0, frames, CHUNK)]
    tokens = []
    for s, piece in zip(range(0, frames, CHUNK), pieces):
        x = piece[None, None]
        for conv in (enc.conv2d1, enc.conv2d2, enc.conv2d3):
            x = F.gelu(conv(x))
        x = enc.conv_out(x.permute(0, 3, 1, 2).flatten(2))[0] + enc.positions[:x.shape[-1]]
        tokens.append(x[:chunk_tokens(min(CHUNK, frames - s))])
    x = torch.cat(tokens)
    windows = []
    for s in range(0, len(x), TOKENS):
        w = x[None, s:s + TOKENS]
        no_mask = torch.zeros(1, 1, w.shape[1], w.shape[1])
        for layer in enc.layers:
            w = layer(w, no_mask)
        windows.append(w[0])
    audio = enc.proj2(F.gelu(enc.proj1(enc.ln_post(torch.cat(windows)))))
    ids_t = torch.tensor(ids)
    h = t.model.embed_tokens(ids_t)
    h[ids_t == model.cfg.audio_token] = audio
    cos, sin = model.rotary(torch.arange(len(ids)), h.dtype)
    classes = t.lm_head(t.model(h, cos, sin, CausalKV())).argmax(-1)
    return classes[ids_t == model.cfg.timestamp_token].tolist()


def test_row_buckets_pad_at_most_a_quarter():
    assert all((bucket(n) - n) / bucket(n) <= 0.25 for n in range(1, ROWS[-1] + 1))
    assert len(ROWS) + sum(1 for w in WIDTHS for r in ROWS if r * w <= 8192) <= 60     # graphs to capture


@pytest.mark.slow                                   # every bucket against single items
def test_bucketed_forward_equals_plain_single_items(aligner):
    """A mixed batch: audio under 1 s, tail chunks, several windows, short and long texts, in one padded forward."""
    rng = np.random.default_rng(1)
    units = [u.text for u in segment("one two three four five six seven eight nine ten eleven twelve thirteen "
                                     "fourteen fifteen", "english")]
    cases = [(0.5, 2), (0.37, 1), (2.3, 6), (4.0, 9), (9.7, 15), (17.2, 15), (1.0, 3), (3.31, 12)]
    mel, frames = log_mels([(0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32) for s, _ in cases],
                           24000, aligner.cfg.audio.num_mel_bins, "cpu")
    ids = [aligner._input_ids(audio_tokens(f), units[:n]) for f, (_, n) in zip(frames, cases)]
    [(_, _, lay)] = aligner.model.plan(frames, mel.shape[-1], ids)
    assert lay.ids.shape[0] > 1 and (lay.sequences == -1).any() and (lay.windows == -1).any()   # padded rows
    got = aligner.model.classify(mel, frames, ids)
    expected = [plain_classes(aligner.model, m[:, :f], x) for m, f, x in zip(mel, frames, ids)]
    assert got == expected
    assert len({c for classes in expected for c in classes}) > 5                # the classes vary


def test_a_batch_beyond_the_largest_graphs_is_split(aligner, monkeypatch):
    mel, frames = log_mels([np.zeros(16000 * 3, np.float32)] * 5, 16000, aligner.cfg.audio.num_mel_bins, "cpu")
    ids = [aligner._input_ids(audio_tokens(f), ["a", "b"]) for f in frames]
    whole = aligner.model.classify(mel, frames, ids)
    monkeypatch.setattr(layout, "ROWS", [1])          # one encoder row: two 3 s windows
    assert [b - a for a, b, _ in aligner.model.plan(frames, mel.shape[-1], ids)] == [2, 2, 1]
    assert aligner.model.classify(mel, frames, ids) == whole


def test_the_mels_shape_is_known_before_they_are_computed(aligner):
    for rate, seconds in [(24000, [0.5, 3.3, 1.0]), (16000, [2.0]), (22050, [0.31, 0.3])]:
        audios = [np.zeros(int(s * rate), np.float32) for s in seconds]
        mel, frames = log_mels(audios, rate, aligner.cfg.audio.num_mel_bins, "cpu")
        assert mel_shape([len(a) for a in audios], rate) == (frames, mel.shape[-1])


def test_the_text_stage_reads_only_the_encoder_rows_it_is_given(aligner):
    """A text graph's audio buffer has room for the largest encoder bucket; past a batch's rows it holds stale values."""
    mel, frames = log_mels([np.ones(24000 * 2, np.float32) * 0.1], 24000, aligner.cfg.audio.num_mel_bins, "cpu")
    ids = [aligner._input_ids(audio_tokens(frames[0]), ["a", "b", "c"])]
    [(_, _, lay)] = aligner.model.plan(frames, mel.shape[-1], ids)
    runs = []
    for scale in (0.0, 1e3):                             # rows past the batch's: zeros, then large stale values
        forward = Forward(aligner.model, lambda: mel, [(0, 1, lay)])
        forward.run(len(aligner.model.encoder))
        audio = forward.x
        forward.x = torch.cat([audio, torch.randn(ROWS[-1] - len(audio), *audio.shape[1:]) * scale])
        forward.run(len(forward.left))
        runs.append(forward.out[0][0].tensors[0])          # the classes of every token (a HostCopy on the CPU)
    assert torch.equal(*runs)


@pytest.mark.slow
def test_graph_buffers_serve_the_batches_they_were_captured_for(aligner, monkeypatch):
    """CUDA graphs stood in for on the CPU (a 'replay' runs the function on the captured buffers and writes the
    static output): every key's buffers take the inputs of a batch that lands on it, and give the eager classes,
    also where a batch takes two forwards on the same graphs."""
    replays = stand_in_graphs(monkeypatch, rows=[1, 2, 4])
    model, rng = aligner.model, np.random.default_rng(2)
    cases = ([0.5], [3.0, 1.2, 9.5], [2.0] * 5, [8.0] * 8)     # the last: two forwards of 4 encoder rows each
    for stage in model.encoder + model.text:
        monkeypatch.setattr(stage, "graphs", {})
    eager = [aligner.align_units([((0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32), ["a", "b", "c"])
                                  for s in seconds], 24000) for seconds in cases]
    model.capture()
    assert all(set(stage.graphs) == {1, 2, 4} for stage in model.encoder)
    assert all(set(stage.graphs) == {(1, 256), (2, 256), (4, 256)} for stage in model.text)
    rng = np.random.default_rng(2)
    for expected, seconds in zip(eager, cases):
        items = [((0.1 * rng.standard_normal(int(s * 24000))).astype(np.float32), ["a", "b", "c"]) for s in seconds]
        assert aligner.align_units(items, 24000) == expected
    slices = lambda rows, text: [rows] * len(model.encoder) + [text] * len(model.text)
    assert len(model.encoder) == len(model.text) == 2                    # (the tiny model's two layers each)
    assert replays == slices(1, (1, 256)) + slices(2, (1, 256)) * 2 + slices(4, (2, 256)) * 2   # 5 x 2 s: 2 rows


def test_a_batch_fits_by_its_packed_rows():
    """64 windows of 4 s pack two to an encoder row (32 rows): one forward, not one per 40 windows."""
    fit = Fit()
    assert all(fit.add(400, 140) for _ in range(64)) and len(fit.encoder) == 32
    fit = Fit()
    assert all(fit.add(500, 10) for _ in range(ROWS[-1])) and not fit.add(500, 10)     # 5 s windows: one per row
    fit = Fit()       # texts of 1,000 tokens: one per 1,024-wide row, 16 rows of graphs
    assert all(fit.add(100, 1000) for _ in range(TEXT_TOKENS // 1024)) and not fit.add(100, 1000)
