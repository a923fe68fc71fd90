"""Model configuration read from a checkpoint's config.json."""
import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.models.qwen3 import LMConfig

ASSETS = Path(__file__).parent / "assets"


@dataclass
class TTSConfig:
    model_type: str
    model_size: str
    talker: LMConfig
    predictor: LMConfig
    text_vocab_size: int
    text_hidden_size: int
    num_code_groups: int
    codec_ids: dict
    languages: dict
    speakers: dict
    speaker_dialect: dict
    text_ids: dict
    speaker_encoder: dict | None
    codec: dict
    generation: dict = field(default_factory=dict)

    @property
    def public_languages(self) -> list[str]:
        return ["auto"] + [k for k in self.languages if "dialect" not in k]

    @property
    def takes_instruct(self) -> bool:
        # the reference drops instruct for the 0.6B CustomVoice
        return self.model_type == "voice_design" or (self.model_type == "custom_voice" and self.model_size != "0b6")

    @property
    def whole_text_layout(self) -> bool:
        """The official generate_* default for a text known whole: all of it in the prompt, except for a clone."""
        return self.model_type in ("custom_voice", "voice_design")

    @classmethod
    def load(cls, model_dir: str | Path) -> "TTSConfig":
        d = Path(model_dir)
        gen_path = d / "generation_config.json"
        return cls.from_dicts(json.loads((d / "config.json").read_text()),
                              json.loads((d / "speech_tokenizer" / "config.json").read_text()),
                              json.loads(gen_path.read_text()) if gen_path.exists() else {})

    @classmethod
    def from_dicts(cls, cfg: dict, codec: dict, gen: dict) -> "TTSConfig":
        t = cfg["talker_config"]
        return cls(
            model_type=cfg["tts_model_type"], model_size=cfg["tts_model_size"],
            talker=LMConfig.from_dict(t), predictor=LMConfig.from_dict(t["code_predictor_config"]),
            text_vocab_size=t["text_vocab_size"], text_hidden_size=t["text_hidden_size"],
            num_code_groups=t["num_code_groups"],
            codec_ids=dict(pad=t["codec_pad_id"], bos=t["codec_bos_id"], eos=t["codec_eos_token_id"],
                           think=t["codec_think_id"], nothink=t["codec_nothink_id"],
                           think_bos=t["codec_think_bos_id"], think_eos=t["codec_think_eos_id"]),
            languages=dict(t.get("codec_language_id") or {}), speakers=dict(t.get("spk_id") or {}),
            speaker_dialect=dict(t.get("spk_is_dialect") or {}),
            text_ids=dict(im_start=cfg.get("im_start_token_id", 151644), im_end=cfg.get("im_end_token_id", 151645),
                          assistant=cfg.get("assistant_token_id", 77091), tts_pad=cfg.get("tts_pad_token_id", 151671),
                          tts_bos=cfg.get("tts_bos_token_id", 151672), tts_eos=cfg.get("tts_eos_token_id", 151673)),
            speaker_encoder=cfg.get("speaker_encoder_config") if cfg["tts_model_type"] == "base" else None,
            codec=codec, generation=gen,
        )
