"""The FLOPs each per-frame stage does and the bytes it must move at least, counted from the model's configs as the
engine computes them, and the share of a GPU's limits a measured time reaches.

FLOPs: matmuls, convolutions and attention scores (2 a multiply-add), as executed: a transposed conv over its carried
input too, attention over every key it reads. Bytes: weights read once per dependent pass; state (the talker's KV,
the predictor's 16-position cache, the codec's attention window and conv history) read and written; activations:
each matmul's and conv's input read and output written once, elementwise work fused into them."""
from dataclasses import dataclass

from engine.models.qwen3 import LMConfig
from engine.kernels.layer_math import BIAS_PAD
from engine.models.qwen3_tts.config import TTSConfig

PEAK_TFLOPS, PEAK_TBPS = 989.0, 3.35        # H100 SXM: dense bf16 tensor cores, HBM3


@dataclass
class Cost:
    itemsize: int = 2
    flops: float = 0
    weights: float = 0
    state: float = 0
    activations: float = 0
    kv_itemsize: int | None = None      # a KV cache of another dtype (fp8): its bytes a value

    @property
    def bytes(self) -> float:
        return self.weights + self.state + self.activations

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.itemsize, *(getattr(self, f) + getattr(other, f) for f in ("flops", "weights", "state",
                                                                                       "activations")))

    def params(self, count: int) -> None:
        self.weights += count * self.itemsize

    def linear(self, rows: int, k: int, n: int, bias: bool = False, accumulate: bool = False) -> None:
        """`accumulate`: the output adds to a tensor it reads (a residual as the GEMM's accumulator)."""
        self.flops += 2 * rows * k * n
        self.params(k * n + bias * n)
        self.activations += rows * (k + n + accumulate * n) * self.itemsize

    def conv(self, batch: int, c_in: int, c_out: int, kernel: int, t_in: int, t_out: int, history: int = 0,
             groups: int = 1, transposed: bool = False, bias: bool = True, dilation: int = 1) -> None:
        """t_in: new input steps; `history` more are carried per stream (read, then the last ones written back). A
        dilated conv keeps dilation - 1 older steps, reads those that make its input whole dilations, and outputs them
        (dropped); its state counts as the kept steps read and written."""
        lead, kept = -t_in % dilation, history + (dilation - 1) * (history > 0)
        self.flops += 2 * batch * c_in // groups * c_out * kernel * ((t_in + history) if transposed else t_out + lead)
        self.params(c_in // groups * c_out * kernel + bias * c_out)
        self.activations += batch * (c_in * (t_in + lead) + c_out * (t_out + lead)) * self.itemsize
        self.state += 2 * batch * kept * c_in * self.itemsize

    def attention(self, streams: int, queries: int, keys: int, heads: int, kv_heads: int, head_dim: int) -> None:
        """Of a stream's `keys`, the last `queries` are its new rows' own: written; the others read."""
        self.flops += 4 * streams * queries * keys * heads * head_dim
        self.state += streams * keys * 2 * kv_heads * head_dim * (self.kv_itemsize or self.itemsize)
        self.activations += 2 * streams * queries * heads * head_dim * self.itemsize

    def gather(self, rows: int, width: int, table_rows: int) -> None:
        self.params(min(rows, table_rows) * width)
        self.activations += rows * width * self.itemsize


def decoder_layers(c: Cost, lm: LMConfig, streams: int, queries: int, keys: int) -> None:
    """One pass of a Qwen3 stack over `queries` rows a stream, each attending to `keys` positions."""
    rows, q, kv = streams * queries, lm.num_heads * lm.head_dim, lm.num_kv_heads * lm.head_dim
    for _ in range(lm.num_layers):
        c.params(2 * lm.hidden_size + 2 * lm.head_dim)                     # input, post-attention, q and k norms
        c.linear(rows, lm.hidden_size, q + 2 * kv)
        c.attention(streams, queries, keys, lm.num_heads, lm.num_kv_heads, lm.head_dim)
        c.linear(rows, q, lm.hidden_size)
        c.linear(rows, lm.hidden_size, 2 * lm.intermediate_size)
        c.linear(rows, lm.intermediate_size, lm.hidden_size)
    c.params(lm.hidden_size)


def talk_cost(cfg: TTSConfig, batch: int, context: int, itemsize: int = 2, kv_itemsize: int | None = None) -> Cost:
    """One talker step: the text row's projection, the stack over `context` cached tokens, codebook 0's logits."""
    c, t = Cost(itemsize, kv_itemsize=kv_itemsize), cfg.talker
    c.gather(batch, cfg.text_hidden_size, cfg.text_vocab_size)
    c.linear(batch, cfg.text_hidden_size, cfg.text_hidden_size, bias=True)
    c.linear(batch, cfg.text_hidden_size, t.hidden_size, bias=True)
    decoder_layers(c, t, batch, 1, context)
    c.linear(batch, t.hidden_size, t.vocab_size)
    return c


def predict_cost(cfg: TTSConfig, batch: int, itemsize: int = 2) -> Cost:
    """Codebooks 1-15: a 2-row prefill then 14 dependent one-row passes over a fresh cache, a head per codebook."""
    c, p, hidden = Cost(itemsize), cfg.predictor, cfg.talker.hidden_size
    groups = cfg.num_code_groups - 1
    projected = p.hidden_size != hidden
    for queries, end in [(2, 2)] + [(1, 3 + j) for j in range(groups - 1)]:
        if queries == 1:
            c.gather(batch, hidden, p.vocab_size)                          # the last code's embedding
        if projected:
            c.linear(batch * queries, hidden, p.hidden_size, bias=True)
        decoder_layers(c, p, batch, queries, end)
    for _ in range(groups):
        c.linear(batch, p.hidden_size, p.vocab_size)
    c.gather(batch, hidden, cfg.talker.vocab_size)                         # codebook 0's talker embedding
    for table_rows in [cfg.talker.vocab_size] + [p.vocab_size] * groups:   # the frame's embedding, every codebook
        c.gather(batch, hidden, table_rows)
    return c


def codec_transformer(c: Cost, d: dict, batch: int) -> None:
    """The decoder's transformer on one frame a stream, attending to its window of earlier frames."""
    hidden, heads, kv_heads, head_dim = d["hidden_size"], d["num_attention_heads"], d["num_key_value_heads"], \
        d["head_dim"]
    c.linear(batch, d["latent_dim"], hidden, bias=True)
    for _ in range(d["num_hidden_layers"]):
        c.params(4 * hidden)                                               # two norms, two layer scales
        for width in (heads, kv_heads, kv_heads):
            c.linear(batch, hidden, width * head_dim, bias=d["attention_bias"])
        c.attention(batch, 1, d["sliding_window"], heads, kv_heads, head_dim)
        c.linear(batch, heads * head_dim, hidden, bias=d["attention_bias"])
        c.linear(batch, hidden, 2 * d["intermediate_size"])
        c.linear(batch, d["intermediate_size"], hidden)
    c.params(hidden)
    c.linear(batch, hidden, d["latent_dim"], bias=True)
    c.state += 2 * batch * 8                                               # the window's position


def decode_cost(codec: dict, batch: int, itemsize: int = 2) -> Cost:
    """One frame of the streaming codec decoder per stream, every layer continuing from the stream's state."""
    c, d = Cost(itemsize), codec["decoder_config"]
    latent, outer, books = d["latent_dim"], d["codebook_dim"], d["num_quantizers"]
    c.gather(batch * books, outer // 2, books * d["codebook_size"])
    for _ in range(2):                                                     # codebook 0, then the sum of the rest
        c.conv(batch, outer // 2, outer, 1, 1, 1, bias=False)
    c.conv(batch, outer, latent, 3, 1, 1, history=2)
    codec_transformer(c, d, batch)
    steps = 1
    for ratio in d["upsampling_ratios"]:
        c.conv(batch, latent, latent, ratio, steps, steps * ratio, transposed=True)
        steps *= ratio
        c.conv(batch, latent, latent, 7, steps, steps, history=6, groups=latent)
        c.params(3 * latent)                                               # layer norm, gamma
        c.linear(batch * steps, latent, 4 * latent, bias=True)
        c.linear(batch * steps, 4 * latent, latent, bias=True)
    dims = [d["decoder_dim"] // 2 ** i for i in range(len(d["upsample_rates"]) + 1)]
    c.conv(batch, latent, dims[0], 7, steps, steps, history=6)
    for rate, c_in, c_out in zip(d["upsample_rates"], dims, dims[1:]):
        c.params(2 * c_in)                                                 # SnakeBeta's alpha and beta
        c.conv(batch, c_in, c_out, 2 * rate, steps, steps * rate, history=1, transposed=True)
        steps *= rate
        for dilation in (1, 3, 9):
            c.params(4 * c_out)                                            # two SnakeBetas
            c.conv(batch, c_out, c_out, 7, steps, steps, history=6 * dilation, dilation=dilation)
            c.linear(batch * steps, c_out + BIAS_PAD, c_out, accumulate=True)     # its bias a row of the weight
    c.params(2 * dims[-1] + 1)                                             # SnakeBeta; the last conv's bias
    c.linear(batch * (steps + 6), dims[-1], 8)          # the last conv, to one channel: a GEMM to its 7 taps (8 rows)
    c.state += 2 * batch * 6 * dims[-1] * c.itemsize                       # over its carried history too
    return c


def stage_costs(cfg: TTSConfig, codec: dict, batch: int, context: int, itemsize: int = 2,
                kv_itemsize: int | None = None) -> dict[str, Cost]:
    return dict(predict=predict_cost(cfg, batch, itemsize), talk=talk_cost(cfg, batch, context, itemsize, kv_itemsize),
                decode=decode_cost(codec, batch, itemsize))


def reached(cost: Cost, ms: float, peak_tflops: float = PEAK_TFLOPS, peak_tbps: float = PEAK_TBPS) -> dict:
    """What a stage timed at `ms` achieves, its share of each limit, and the floor time the limits allow."""
    tflops, tbps = cost.flops / ms / 1e9, cost.bytes / ms / 1e9
    floor_ms = max(cost.flops / peak_tflops, cost.bytes / peak_tbps) / 1e9
    return dict(ms=ms, gflop=cost.flops / 1e9, gb=cost.bytes / 1e9, weights_gb=cost.weights / 1e9,
                state_gb=cost.state / 1e9, activations_gb=cost.activations / 1e9, tflops=tflops, tbps=tbps,
                tflops_share=tflops / peak_tflops, tbps_share=tbps / peak_tbps, floor_ms=floor_ms,
                bound="compute" if cost.flops / peak_tflops > cost.bytes / peak_tbps else "memory")
