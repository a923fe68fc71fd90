"""Our aligner against the official `qwen-asr` Qwen3ForcedAligner, on one tiny checkpoint with identical weights.

The checkpoint is built and saved with the official classes. Their save writes the thinker's class model type
(`qwen3_asr_thinker`), with which their own loader builds a vocabulary head; config.json is repaired to say
`qwen3_forced_aligner`, as the published one does. Weights come from engine.models.weights.seed_weights, with the head
limited to the first 60 classes (0-4.8 s), a faint `<timestamp>` embedding and sharp text attention, so that the
timestamps vary from word to word instead of repeating one class."""
import json
import shutil
import unicodedata

import numpy as np
import pytest
import torch

qwen_asr = pytest.importorskip("qwen_asr")
pytest.importorskip("nagisa")

from qwen_asr.core.transformers_backend import Qwen3ASRConfig, Qwen3ASRForConditionalGeneration  # noqa: E402
from qwen_asr.core.transformers_backend.modeling_qwen3_asr import Qwen3ASRAudioEncoderLayer  # noqa: E402
from qwen_asr.inference.qwen3_forced_aligner import Qwen3ForceAlignProcessor  # noqa: E402

from aligner import Aligner  # noqa: E402
from aligner.align import repair  # noqa: E402
from aligner.config import PUBLISHED, tiny_config  # noqa: E402
from aligner.front_end import FRONT_ENDS  # noqa: E402
from aligner.text import clean, segment  # noqa: E402
from engine.models.weights import seed_weights  # noqa: E402

pytestmark = pytest.mark.slow                # parity with qwen-asr

CASES = [
    ("english", "Hello there, it's a fine day in McDonald's iPhone land. 3.5 e.g. don't!", 3.3),
    ("chinese", "我爱北京天安门，ok好的abc。今天 weather 很好", 2.05),
    ("japanese", "今日は良い天気ですね。東京へ行きます！ＡＢＣも", 1.0),
    ("english", "short", 0.5),
]


def speech(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    tone = np.sin(2 * np.pi * np.cumsum(rng.uniform(100, 400, n)) / 16000)
    return (0.1 * tone * (rng.random(n) > 0.3) + 0.02 * rng.standard_normal(n)).astype(np.float32)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_aligner")
    cfg = tiny_config()
    model = Qwen3ASRForConditionalGeneration(Qwen3ASRConfig(**{k: v for k, v in cfg.items() if k not in (
        "model_type", "architectures", "transformers_version")}))
    seed_weights(model, 3)
    with torch.no_grad():
        head = model.thinker.lm_head.weight
        head[60:] = 0
        head[:60] *= 4
        model.thinker.model.embed_tokens.weight[cfg["timestamp_token_id"]] *= 0.02
        for layer in model.thinker.model.layers:
            layer.self_attn.q_norm.weight.mul_(4)
            layer.self_attn.k_norm.weight.mul_(4)
    model.save_pretrained(path)
    saved = json.loads((path / "config.json").read_text())
    assert saved["thinker_config"]["model_type"] == "qwen3_asr_thinker"
    saved["thinker_config"]["model_type"] = "qwen3_forced_aligner"
    (path / "config.json").write_text(json.dumps(saved))
    for name in ("tokenizer_config.json", "preprocessor_config.json", "chat_template.json", "vocab.json", "merges.txt"):
        shutil.copy(PUBLISHED / name, path / name)
    return path, set(model.state_dict())


@pytest.fixture(scope="module")
def official(checkpoint):
    aligner = qwen_asr.Qwen3ForcedAligner.from_pretrained(str(checkpoint[0]), dtype=torch.float32)
    assert aligner.model.thinker.lm_head.out_features == 5000
    return aligner


@pytest.fixture(scope="module", params=FRONT_ENDS)
def ours(checkpoint, request):
    return Aligner.load(model=str(checkpoint[0]), device="cpu", front_end=request.param)


def official_align(official, audio, text, language):
    return [(i.text, i.start_time, i.end_time) for i in official.align((audio, 16000), text, language)[0]]


def test_weight_names_match_the_checkpoint(checkpoint, ours):
    assert set(ours.model.state_dict()) == checkpoint[1]


@pytest.mark.parametrize("language, text, seconds", CASES)
def test_align_matches_official(official, ours, language, text, seconds):
    audio = speech(seconds, len(text))
    expected = official_align(official, audio, text, language.capitalize())
    words = ours.align(audio, text, language)
    assert [(w.word, w.start, w.end) for w in words] == expected
    if len(words) > 3:
        assert len({w.end for w in words}) >= 3                 # the timestamps vary
    for w in words:                                            # spans point at the words in the text
        assert clean(unicodedata.normalize("NFKC", text[w.char_start:w.char_end])) == w.word


def test_input_ids_match_official(official, ours):
    audio = speech(2.3, 0)
    text = "Hi McDonald's iPhone, 我爱你 ok"
    units, prompt = Qwen3ForceAlignProcessor().encode_timestamp(text, "English")
    inputs = official.processor(text=[prompt], audio=[audio], return_tensors="pt", padding=True)
    from aligner.audio_encoder import audio_tokens
    assert ours._input_ids(audio_tokens(len(audio) // 160), units) == inputs["input_ids"][0].tolist()


def test_long_audio_attends_within_8s_windows(official, ours, monkeypatch):
    """Beyond 8 s the encoder attends within 104-token windows (flash-attention and vLLM behaviour). The
    transformers eager/SDPA path drops the window mask it builds; give it back for the comparison."""
    forward, tower = Qwen3ASRAudioEncoderLayer.forward, official.model.thinker.audio_tower

    def windowed(self, hidden_states, cu_seqlens, attention_mask=None, **kwargs):
        return forward(self, hidden_states, cu_seqlens, tower._prepare_attention_mask(hidden_states, cu_seqlens), **kwargs)

    monkeypatch.setattr(Qwen3ASRAudioEncoderLayer, "forward", windowed)
    text = "one two three four five six seven eight nine ten eleven twelve thirteen"
    audio = speech(9.7, 1)
    assert [(w.word, w.start, w.end) for w in ours.align(audio, text, "english")] == \
        official_align(official, audio, text, "English")


def test_batch_equals_single(ours):
    items = [(speech(s, i), [u.text for u in segment(t, lang)]) for i, (lang, t, s) in enumerate(CASES)]
    assert ours.align_units(items) == [ours.align_units([item])[0] for item in items]


@pytest.mark.parametrize("language", ["English", "Chinese", "Japanese", "Korean", "German", "French"])
def test_segmentation_matches_official(language):
    texts = ["Hello, world! It's 3.5 e.g. — “quoted” don't-stop", "我爱北京天安门，ok好的abc。今天 weather 很好",
             "今日は良い天気ですね。東京へ行きます！ＡＢＣ１２３", "안녕하세요, 저는 학생입니다! 한국어 테스트",
             "Größe über Straße, l'été à Noël; naïve café", "  \t\n ... ", ""]
    processor = Qwen3ForceAlignProcessor()
    for text in texts:
        assert [u.text for u in segment(text, language.lower())] == processor.encode_timestamp(text, language)[0]


def test_repair_matches_official():
    processor, rng = Qwen3ForceAlignProcessor(), np.random.default_rng(0)
    for n in list(range(1, 12)) * 20 + [60, 200]:
        values = rng.integers(0, 40, n) * 80.0 if n % 3 else np.sort(rng.integers(0, 99, n)) * 80.0
        values[rng.random(n) < 0.2] = rng.integers(0, 99) * 80.0          # outliers among sorted values
        assert repair(values.astype(np.float32).tolist()) == processor.fix_timestamp(values.astype(np.float32))


def test_cli_align_json_matches_official(checkpoint, official, tmp_path, capsys):
    from engine.api.wav import write_wav
    from gateway.cli import main
    wav, text = tmp_path / "speech.wav", "Hello there, it's a fine day in McDonald's iPhone land."
    write_wav(wav, speech(3.3, 7), rate=16000)
    assert main(["align", "--model", str(checkpoint[0]), "--audio", str(wav), "--text", text, "--language", "english",
                 "--json", "--device", "cpu"]) == 0
    got = [(w["word"], w["start"], w["end"]) for w in json.loads(capsys.readouterr().out)]
    assert got == [(i.text, i.start_time, i.end_time) for i in official.align(str(wav), text, "English")[0]]


def test_japanese_segmentation_matches_official_in_any_unicode_form():
    """nagisa reads NFKC, so ours (which segments the NFKC form to map spans back) cuts as the official does."""
    processor = Qwen3ForceAlignProcessor()
    for text in ["新しいｶﾞｲﾄﾞﾌﾞｯｸを本日発売しました。", unicodedata.normalize("NFD", "ガイドブックです。詳しく"),
                 "ＡＢＣ１２３とİstanbul、２０２６年！", "カフェ\u0301で 1️⃣ 👍🏽を"]:
        assert [u.text for u in segment(text, "japanese")] == processor.encode_timestamp(text, "Japanese")[0]
