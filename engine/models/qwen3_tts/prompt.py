"""A request's conditioning -> the talker's prefill rows and the text still to feed, as the reference lays them out."""
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial

import torch

from engine.core.transfer import upload
from engine.models.base import Prefix, Prompt
from engine.models.qwen3_tts.config import TTSConfig
from engine.models.qwen3_tts.talker import Talker

_voice_ids = itertools.count()


@dataclass(eq=False)
class Voice:
    """Compared by identity: what is derived from a clone is cached on it."""
    speaker_id: int | None = None
    xvector: torch.Tensor | None = None
    ref_codes: torch.Tensor | None = None
    ref_text_ids: list[int] | None = None
    codec_state: list | None = None
    frame_rows: torch.Tensor | None = None
    uid: int = field(default_factory=lambda: next(_voice_ids))

    @property
    def key(self):
        """A number for a clone, so caches keep no Voice alive."""
        return self.speaker_id if self.xvector is None else ("clone", self.uid)


class PromptBuilder:
    CACHED_ROWS = 512
    CACHED_MAX_IDS = 64

    def __init__(self, cfg: TTSConfig, talker: Talker):
        self.cfg, self.talker = cfg, talker
        self._cache: OrderedDict = OrderedDict()
        self.share_prefixes = True      # False: every stream prefills its whole prompt

    def _rows(self, embed, ids: list[int]) -> torch.Tensor:
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

    def _text_specials(self):
        t = self.cfg.text_ids
        return self._p([t["tts_pad"], t["tts_bos"], t["tts_eos"]]).chunk(3)

    def _codec_pad_bos(self):
        return self._e([self.cfg.codec_ids["pad"], self.cfg.codec_ids["bos"]]).chunk(2)

    @property
    def _device(self):
        return self.talker.codec_head.weight.device

    def language_id(self, language: str, speaker: str | None) -> int | None:
        dialect = self.cfg.speaker_dialect.get(speaker) if speaker else False
        if dialect and language in ("chinese", "auto"):
            return self.cfg.languages[dialect]
        return None if language == "auto" else self.cfg.languages[language]

    def _control(self, voice: Voice, language_id: int | None) -> list[int]:
        c = self.cfg.codec_ids
        control = [c["nothink"], c["think_bos"], c["think_eos"]] if language_id is None else \
            [c["think"], c["think_bos"], language_id, c["think_eos"]]
        return control + ([voice.speaker_id] if voice.speaker_id is not None else [])

    def prefix(self, voice: Voice, language_id: int | None, instruct_ids: list[int] | None, role_ids: list[int],
               non_streaming: bool) -> Prefix:
        if not self.share_prefixes:
            return Prefix((), 0, 0)
        icl = voice.ref_codes is not None
        body = 0
        if icl:
            body = len(voice.ref_text_ids) if non_streaming else min(len(voice.ref_text_ids), voice.ref_codes.shape[0])
        codec = len(self._control(voice, language_id)) + (voice.speaker_id is None and voice.xvector is not None) + 1
        key = (voice.key, language_id, tuple(instruct_ids or ()), tuple(role_ids), non_streaming if icl else None)
        return Prefix(key, len(instruct_ids or ()) + len(role_ids) + codec + body, body)

    @torch.inference_mode()
    def prefix_rows(self, voice: Voice, language_id: int | None, instruct_ids: list[int] | None, role_ids: list[int],
                    body: int, non_streaming: bool) -> torch.Tensor:
        pad, bos, _ = self._text_specials()
        codec_pad, _ = self._codec_pad_bos()
        codec = [self._e(self._control(voice, language_id))]
        if voice.speaker_id is None and voice.xvector is not None:
            codec.append(voice.xvector.to(pad.dtype)[None])
        codec = torch.cat(codec + [codec_pad])
        rows = [self._p(instruct_ids)] if instruct_ids else []
        rows += [self._p(role_ids), torch.cat([pad.expand(codec.shape[0] - 1, -1), bos]) + codec]
        if body:
            side = codec_pad if non_streaming else self._frames(voice)[:body]
            rows.append(self._p(voice.ref_text_ids[:body]) + side)
        return torch.cat(rows)

    def _frames(self, voice: Voice) -> torch.Tensor:
        if voice.frame_rows is None:
            frames = self.talker.embed_frame(upload(voice.ref_codes, device=self._device))
            voice.frame_rows = torch.cat([self._codec_pad_bos()[1], frames])
        return voice.frame_rows

    @torch.inference_mode()
    def build(self, voice: Voice, language_id: int | None, instruct_ids: list[int] | None, role_ids: list[int],
              feed: list[int], closed: bool, non_streaming: bool) -> Prompt | None:
        icl = voice.ref_codes is not None
        if (non_streaming and not closed) or not feed or (icl and not closed and len(feed) < voice.ref_codes.shape[0] + 1):
            return None
        prefix = self.prefix(voice, language_id, instruct_ids, role_ids, non_streaming)
        pad, _, eos = self._text_specials()
        codec_pad, codec_bos = self._codec_pad_bos()
        if icl:
            rows, consumed, eos_in = self._icl_body(voice, feed, prefix.body, closed, non_streaming)
        elif non_streaming:
            rows = torch.cat([torch.cat([self._p(feed), eos]) + codec_pad, pad + codec_bos])
            consumed, eos_in = len(feed), True
        else:
            rows, consumed, eos_in = self._p(feed[:1]) + codec_bos, 1, False
        prefix_rows = partial(self.prefix_rows, voice, language_id, instruct_ids, role_ids, prefix.body, non_streaming)
        if not prefix.length:
            rows, prefix_rows = torch.cat([prefix_rows(), rows]), None
        talk_id = feed[0] if rows.shape[0] == 1 and not icl and not non_streaming else None
        return Prompt(prefix, prefix_rows, rows, consumed, eos_in, talk_id)

    def talk_frame(self) -> torch.Tensor:
        """The frame row a prompt's talk row stands on: the codec's bos."""
        return self._codec_pad_bos()[1]

    def _icl_body(self, voice, feed, fixed, closed, non_streaming):
        pad, _, eos = self._text_specials()
        x = self._p(feed[fixed:])
        if closed:
            x = torch.cat([x, eos])
        if non_streaming:
            return torch.cat([x + self._codec_pad_bos()[0], self._frames(voice) + pad]), len(feed), True
        y = self._frames(voice)[fixed:]
        if not closed or x.shape[0] > y.shape[0]:      # the text outlasts the frames: the rest is fed per frame
            return x[:y.shape[0]] + y, fixed + y.shape[0], False
        return torch.cat([x, pad.expand(y.shape[0] - x.shape[0], -1)]) + y, len(feed), True
