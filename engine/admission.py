"""Who may join, decided on the engine thread as a request arrives: a free slot, a step time that leaves the running
streams real time, and KV memory for what the new stream will need. A request beyond them gets `busy` at once,
never a place in a queue; no running stream is ever cut to make room."""
from .request import EngineInputError

HORIZON_TOKENS = 512           # KV held back per stream whose length is open (41 s of audio); it may grow past it


class Admission:
    def __init__(self, max_seqs: int, kv_tokens: int, block_size: int, max_step_ms: float | None = None):
        self.max_seqs, self.kv_tokens, self.block_size, self.max_step_ms = max_seqs, kv_tokens, block_size, max_step_ms
        self.reserved = 0              # KV tokens held back for the admitted streams
        self.refused = 0

    def reserve_tokens(self, seq) -> int:
        """The KV a stream is expected to fill: its prompt, and a frame (one token) for each frame it may speak."""
        r, voice = seq.request, seq.voice
        text_ids = max(seq.num_text_ids, len(r.text) // 3)        # before its tokenization: ~4 characters an id
        prompt = 16 + len(seq.instruct_ids or ()) + seq.text_start + (text_ids if r.non_streaming_text else 0)
        if voice is not None and voice.ref_codes is not None:
            prompt += voice.ref_codes.shape[0]
        frames = r.max_frames if r.max_frames is not None else 40 + 8 * text_ids if seq.closed else HORIZON_TOKENS
        tokens = prompt + min(frames, HORIZON_TOKENS) + 2
        return -(-tokens // self.block_size) * self.block_size

    def admit(self, seq, active: int, step_ms: float) -> None:
        """Raises EngineInputError (`busy`, or `text_too_long` for a stream no empty pool could hold)."""
        need = self.reserve_tokens(seq)
        if need > self.kv_tokens:
            raise EngineInputError("text_too_long", f"the request needs about {need} KV tokens; the whole cache "
                                                    f"holds {self.kv_tokens}")
        if active >= self.max_seqs:
            self._refuse(f"{self.max_seqs} streams are generating")
        if self.max_step_ms is not None and active and step_ms > self.max_step_ms:
            self._refuse(f"at capacity ({step_ms:.0f} ms per 80 ms frame step)")
        if self.reserved + need > self.kv_tokens:
            self._refuse(f"the KV cache is committed ({self.reserved} of {self.kv_tokens} tokens)")
        seq.reserved = need
        self.reserved += need

    def release(self, seq) -> None:
        self.reserved -= seq.reserved
        seq.reserved = 0

    def _refuse(self, why: str):
        self.refused += 1
        raise EngineInputError("busy", f"server busy: {why}; retry shortly")
