"""Qwen3-TTS's request layout: voice, language, instruct, prompt prefix and the text fed per frame."""
from dataclasses import dataclass

from engine.api.request import EngineInputError
from engine.models.qwen3_tts.prompt import Voice

ROLE = "<|im_start|>assistant\n"
PROMPT_CONTROL_ROWS = 16                # admission's estimate of the control rows


@dataclass
class Conditioning:
    voice: Voice
    language_id: int | None
    instruct_ids: list[int] | None


class RequestLayout:
    text_prefix = ROLE

    def prepare(self, seq, voices) -> None:
        r, cfg = seq.request, self.cfg
        speaker, instruct_ids = None, None
        if cfg.model_type == "custom_voice":
            speaker = (r.voice or next(iter(cfg.speakers))).lower()
            voice = Voice(speaker_id=cfg.speakers[speaker])
        elif cfg.model_type == "base":
            voice = self.make_voice(r.ref) if r.ref is not None else voices.get(r.voice)
            if voice is None:
                raise EngineInputError("unknown_voice", f"voice '{r.voice}' was deleted")
        else:
            voice = Voice()
        if r.instruct:
            instruct_ids = self.tokenizer.encode_prompt("<|im_start|>user\n", r.instruct, "<|im_end|>\n")
        seq.conditioning = c = Conditioning(voice, self.builder.language_id((r.language or "auto").lower(), speaker),
                                            instruct_ids)
        if voice.ref_codes is not None:
            seq.text.feed = list(voice.ref_text_ids or [])
            seq.text.text_start = len(seq.text.feed)
        seq.prefix = self.builder.prefix(voice, c.language_id, instruct_ids, self.role_ids, r.non_streaming_text)

    def prompt(self, seq):
        c = seq.conditioning
        text = seq.text
        return self.builder.build(c.voice, c.language_id, c.instruct_ids, text.role_ids, text.feed, text.closed,
                                  seq.request.non_streaming_text)

    def prompt_tokens(self, seq, text_ids: int) -> int:
        c = seq.conditioning
        prompt = PROMPT_CONTROL_ROWS + len(c.instruct_ids or ()) + seq.text.text_start
        prompt += text_ids if seq.request.non_streaming_text else 0
        if c.voice.ref_codes is not None:
            prompt += c.voice.ref_codes.shape[0]
        return prompt
