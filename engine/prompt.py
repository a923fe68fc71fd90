"""Stage 1: a request's conditioning -> the talker's prefill rows and the text still to feed.

Rows are sums of a text-side embedding P(id) and a codec-side embedding, laid out as the reference's
generate() does (see docs: instruct, role, codec control, body). The text that follows the prompt is
fed one id per frame (`feed[consumed:]`, then tts_eos, then tts_pad)."""
from collections import OrderedDict
from dataclasses import dataclass

import torch

from .config import TTSConfig
from .talker import Talker
from .transfer import upload


@dataclass(eq=False)
class Voice:
    """Resolved voice conditioning: a CustomVoice speaker id, or a Base clone's x-vector (+ ICL reference).
    Compared by identity: what is derived from a clone's reference is cached on it."""
    speaker_id: int | None = None
    xvector: torch.Tensor | None = None        # [H]
    ref_codes: torch.Tensor | None = None      # [T, 16] int64 (ICL)
    ref_text_ids: list[int] | None = None      # ICL transcript ids
    codec_state: list | None = None            # the codec decoder's state after ref_codes (runner.start)


@dataclass
class Prompt:
    rows: torch.Tensor          # [L, H]
    consumed: int               # ids of the feed list already inside the prompt
    eos_consumed: bool          # tts_eos already inside the prompt (non-streaming layouts)


class PromptBuilder:
    CACHED_ROWS = 512           # short id runs (control tokens, speakers, role, instructs) embedded once
    CACHED_MAX_IDS = 64

    def __init__(self, cfg: TTSConfig, talker: Talker):
        self.cfg, self.talker = cfg, talker
        self._cache: OrderedDict = OrderedDict()

    def _rows(self, embed, ids: list[int]) -> torch.Tensor:
        """embed(ids) through an LRU: a prompt's fixed parts cost no GPU work after the first request."""
        key = (embed, tuple(ids))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        rows = embed(upload(ids, device=self._device))
        if len(ids) <= self.CACHED_MAX_IDS:
            self._cache[key] = rows
            if len(self._cache) > self.CACHED_ROWS:
                self._cache.popitem(last=False)
        return rows

    def _p(self, ids: list[int]) -> torch.Tensor:
        return self._rows(self.talker.embed_text, ids)

    def _e(self, ids: list[int]) -> torch.Tensor:
        return self._rows(self.talker.embed_codec, ids)

    @property
    def _device(self):
        return self.talker.codec_head.weight.device

    def language_id(self, language: str, speaker: str | None) -> int | None:
        dialect = self.cfg.speaker_dialect.get(speaker) if speaker else False
        if dialect and language in ("chinese", "auto"):
            return self.cfg.languages[dialect]
        return None if language == "auto" else self.cfg.languages[language]

    @torch.inference_mode()
    def build(self, voice: Voice, language_id: int | None, instruct_ids: list[int] | None, role_ids: list[int],
              feed: list[int], closed: bool, non_streaming: bool) -> Prompt | None:
        """None while too little text has arrived to lay out the prompt."""
        t, c = self.cfg.text_ids, self.cfg.codec_ids
        icl = voice.ref_codes is not None
        if (non_streaming and not closed) or not feed or (icl and not closed and len(feed) < voice.ref_codes.shape[0] + 1):
            return None
        pad, bos, eos = self._p([t["tts_pad"], t["tts_bos"], t["tts_eos"]]).chunk(3)
        control = [c["nothink"], c["think_bos"], c["think_eos"]] if language_id is None else \
            [c["think"], c["think_bos"], language_id, c["think_eos"]]
        codec = [self._e(control)]
        if voice.speaker_id is not None:
            codec.append(self._e([voice.speaker_id]))
        elif voice.xvector is not None:
            codec.append(voice.xvector.to(pad.dtype)[None])
        codec.append(self._e([c["pad"], c["bos"]]))
        codec = torch.cat(codec)
        text_side = torch.cat([pad.expand(codec.shape[0] - 2, -1), bos])
        rows = [self._p(instruct_ids)] if instruct_ids else []
        rows += [self._p(role_ids), text_side + codec[:-1]]
        codec_bos = codec[-1:]
        if icl:
            body, consumed, eos_in = self._icl_body(voice, feed, closed, pad, eos, codec_bos, non_streaming)
        elif non_streaming:
            text = torch.cat([self._p(feed), eos])
            body = [text + self._e([c["pad"]]), pad + codec_bos]
            consumed, eos_in = len(feed), True
        else:
            body, consumed, eos_in = [self._p(feed[:1]) + codec_bos], 1, False
        return Prompt(torch.cat(rows + body), consumed, eos_in)

    def _icl_body(self, voice, feed, closed, pad, eos, codec_bos, non_streaming):
        """Reference transcript + target text over (codec bos + reference frames)."""
        codes = upload(voice.ref_codes, device=self._device)
        frames = self.talker.embed_frame(codes)                  # [T, H]
        y = torch.cat([codec_bos, frames])                       # T2 rows
        x = self._p(feed)
        if closed:
            x = torch.cat([x, eos])
        if non_streaming:
            return [x + self._e([self.cfg.codec_ids["pad"]]), y + pad], len(feed), True
        if x.shape[0] > y.shape[0]:
            return [x[:y.shape[0]] + y], y.shape[0], False
        x = torch.cat([x, pad.expand(y.shape[0] - x.shape[0], -1)])
        return [x + y], len(feed), True
