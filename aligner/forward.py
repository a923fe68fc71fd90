"""One batch's forward as slices (a CUDA graph each), so a turn between the engine's steps stays short."""
import torch

from engine.core.transfer import HostCopy

from .audio_encoder import CHUNK, SLOTS, TOKENS, conv_out_len


class Forward:
    def __init__(self, model, mel, plan: list):
        self.model, self.make_mel, self.plan = model, mel, plan
        self.stages = len(model.encoder) + len(model.text)
        self.slices = [(p, s) for p in range(len(plan)) for s in range(self.stages)]
        self.weights = [gflop(model, plan[p][2], s) for p, s in self.slices]
        self.done, self.out = 0, []
        self.mel = self.x = self.inputs = None
        self.inputs_of = None                   # the part whose inputs are on the device

    @property
    def left(self) -> list[float]:
        return self.weights[self.done:]

    @property
    def prepared(self) -> bool:
        return self.mel is not None or self.done > 0

    @torch.inference_mode()
    def prepare(self) -> None:
        """The mel and the first part's inputs, queued before the turn's wait for the step: its graphs alone then
        follow the step, and the device runs them without waiting on the host's launches."""
        if not self.prepared:
            self._inputs(0)

    def _inputs(self, p: int) -> None:
        if self.mel is None:
            self.mel = self.make_mel()
        if self.inputs_of != p:
            a, b, lay = self.plan[p]
            self.inputs, self.inputs_of = self.model.inputs(lay, self.mel[a:b]), p

    @torch.inference_mode()
    def run(self, count: int) -> None:
        m, encoder = self.model, len(self.model.encoder)
        for p, s in self.slices[self.done:self.done + count]:
            lay = self.plan[p][2]
            if s == 0:
                self._inputs(p)
            (chunks, conv_frames, windows), (ids, positions, sequences, *embed) = self.inputs
            rows, text = (len(lay.windows), lay.ids.shape) if lay.captured else (None, None)   # None: eager
            if s < encoder:
                self.x = m.encoder[s](rows, *((chunks, windows, conv_frames) if s == 0 else (self.x, windows)))
            else:
                first = s == encoder
                self.x = m.text[s - encoder](text, *((ids, positions, sequences, *embed, self.x) if first
                                                               else (self.x, positions, sequences)))
                if s == self.stages - 1:     # a copy, queued now: the next part may replay the same graph
                    self.out.append((HostCopy(self.x.flatten().clone()), lay.stamps))
            self.done += 1
        if not self.left and self.x is not None and self.x.is_cuda:
            self.mel = self.x = self.inputs = None     # the device buffers go back while the results are read

    def read(self) -> list[list[int]]:
        """The classes at each timestamp; waits only for this forward's copies (from any thread: no kernels)."""
        return [row[s].tolist() for copy, stamps in self.out for row in copy.wait() for s in stamps]


def gflop(model, lay, stage: int) -> float:
    """GFLOP of one slice over `lay`, to share a turn's time among slices."""
    a, t = model.cfg.audio, model.cfg.text
    encoder = len(model.encoder)
    if stage < encoder:
        n, layers = len(lay.windows) * TOKENS, model.encoder_layers[stage]
        per_layer = 2 * n * (4 * a.d_model ** 2 + 2 * a.d_model * a.ffn_dim) + 4 * n * TOKENS * a.d_model
        flops = per_layer * (layers.stop - layers.start)
        if stage == 0:
            flops += len(lay.windows) * SLOTS * conv_gflop(a) * 1e9
        if stage == encoder - 1:
            flops += 2 * n * (a.d_model ** 2 + a.d_model * a.output_dim)
        return flops / 1e9
    rows, width = lay.ids.shape
    n, layers = rows * width, model.text_layers[stage - encoder]
    q, kv = t.num_heads * t.head_dim, t.num_kv_heads * t.head_dim
    per_layer = 2 * n * t.hidden_size * (2 * q + 2 * kv + 3 * t.intermediate_size) + 4 * n * width * q
    flops = per_layer * (layers.stop - layers.start)
    if stage == encoder + len(model.text) - 1:
        flops += 2 * n * t.hidden_size * model.cfg.classes
    return flops / 1e9


def conv_gflop(a) -> float:
    """The encoder's conv front end on one chunk slot (a full second, whatever the slot holds)."""
    c, (m1, m2, m3), (t1, t2, t3) = a.downsample_hidden, halvings(a.num_mel_bins), halvings(CHUNK)
    return (2 * 9 * c * (m1 * t1 + c * (m2 * t2 + m3 * t3)) + 2 * t3 * c * m3 * a.d_model) / 1e9


def halvings(n: int) -> list[int]:
    out = []
    for _ in range(3):
        out.append(n := conv_out_len(n))
    return out
