"""Qwen3-TTS's request layout: voice, language, instruct, prompt prefix and the text fed per frame."""
from engine.api.request import EngineInputError
from engine.models.qwen3_tts.prompt import Voice

ROLE = "<|im_start|>assistant\n"
PROMPT_CONTROL_ROWS = 16                # admission's estimate of the control rows


class RequestLayout:
    text_prefix = ROLE

    def prepare(self, seq, voices) -> None:
        r, cfg = seq.request, self.cfg
        speaker = None
        if cfg.model_type == "custom_voice":
            speaker = (r.voice or next(iter(cfg.speakers))).lower()
            seq.voice = Voice(speaker_id=cfg.speakers[speaker])
        elif cfg.model_type == "base":
            seq.voice = self.make_voice(r.ref) if r.ref is not None else voices.get(r.voice)
            if seq.voice is None:
                raise EngineInputError("unknown_voice", f"voice '{r.voice}' was deleted")
        else:
            seq.voice = Voice()
        seq.language_id = self.builder.language_id((r.language or "auto").lower(), speaker)
        if r.instruct:
            seq.instruct_ids = self.tokenizer.encode(f"<|im_start|>user\n{r.instruct}<|im_end|>\n")
        if seq.voice.ref_codes is not None:
            seq.feed = list(seq.voice.ref_text_ids or [])
            seq.text_start = len(seq.feed)
        seq.prefix = self.builder.prefix(seq.voice, seq.language_id, seq.instruct_ids, self.role_ids,
                                         r.non_streaming_text)

    def prompt(self, seq):
        return self.builder.build(seq.voice, seq.language_id, seq.instruct_ids, seq.role_ids, seq.feed, seq.closed,
                                  seq.request.non_streaming_text)

    def prompt_tokens(self, seq, text_ids: int) -> int:
        r, voice = seq.request, seq.voice
        prompt = PROMPT_CONTROL_ROWS + len(seq.instruct_ids or ()) + seq.text_start
        prompt += text_ids if r.non_streaming_text else 0
        if voice is not None and voice.ref_codes is not None:
            prompt += voice.ref_codes.shape[0]
        return prompt
