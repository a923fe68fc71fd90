"""Our text tokenizer against the official processor (loaded locally, as the wrapper does), client text as plain text
(no control ids), and the rule for committing tokens of a text that is still arriving."""
import random
import shutil

import pytest

from engine.models.qwen3_tts.config import ASSETS
from engine.models.qwen3_tts.text_tokenizer import SERIAL_BATCH, TextTokenizer

CORPUS = [
    "Hello, world! This is a test.",
    "iPhone McDonald's XMLHttpRequest camelCaseWords getHTTPResponseCode OK",
    "I'm sure you'd've known: don't, won't, can't. WE'LL SEE! They're here; it's 5 o'clock.",
    "Call 555-1234 or +1 (800) 123.4567 at 10:30am on 2024-01-31; pi is 3.14159, 1,000,000 $99.99 50% off",
    "Wait... what?!? \"Quoted\" (parens) [brackets] {braces} <angle> a/b/c C:\\path\\file.txt http://x.y/z?q=1&r=2#f",
    "今天天气很好，我们去公园散步吧。你觉得怎么样？",
    "東京は日本の首都です。カタカナのテキストーとひらがな、漢字を混ぜます！",
    "안녕하세요, 만나서 반갑습니다. 오늘 날씨가 좋네요!",
    "Grüße aus München! Straße, Fußgänger, Äpfel und Öl. Ça va? Élève, garçon, naïve, coöperate, déjà vu.",
    "Decomposed: e\u0301te\u0301, A\u030angstro\u0308m, n\u0303, \u1100\u1161\u11a8 and a\u0323\u0302.",
    "Emoji 😀👍🏽 👨‍👩‍👧 ❤️ 🇯🇵 mixed with text 🎉!!",
    "Multiple   spaces\tand\ttabs\n\nnew lines\r\nCRLF  \n  indented\n\n\n   trailing   ",
    "  leading spaces and a trailing newline\n",
    "Mixed 中文 and English, 日本語 too; 한국어 also. 1234567890 digits 一二三",
    "Special <|im_start|> and <tts_pad> inside text, partial <|im_ and <tts_ too, <think>maybe</think>",
    "Symbols: ≠ ≤ ≥ ± × ÷ → ← ∞ © ® ™ € £ ¥ — – … «guillemets» „deutsch“ ‘single’",
    "ǅungla ǈ ß ẞ ﬁ ʰʲ Ωmega αβγ ДОБРЫЙ день Привет",
    "",
]
CONTROL_TOKENS = sorted(TextTokenizer.load().special_ids)
WRAPPERS = ["{}", "<|im_start|>assistant\n{}<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>assistant\n{}<|im_end|>\n",
            "<|im_start|>user\n{}<|im_end|>\n"]
ATOMS = list("aAzZé1 9.,!?'\"-/\\\n\r\t:;()") + [
    "e\u0301", "\u0301", "\u0323", "\u0338", "=", "<", "<|", "<tts_", "<|im_end|>", "<|im_start|>", "<tts_pad>",
    "<tts_text_bos>", "<tts_text_bos_single>", "iPhone", "McDonald", "don't", "DON'T", "中文", "。", "カタカナー", "한국어",
    "\u1100", "\u1161", "\u11a8", "😀", "👍🏽", "\u200d", "\ufe0f", "  ", "\n\n", " \n", "...", "3.14", "\u3000", "\xa0",
    "ß", "ǅ", "ʰ", "\x1c", "/\n", "http://x.y/z"]


def fuzz_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 20))) for _ in range(count)]


@pytest.fixture(scope="module")
def ours():
    return TextTokenizer.load(exact=True)


def controls(text: str) -> bool:
    return any(t in text for t in CONTROL_TOKENS)


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """The official processor from a local model directory, loaded exactly as the wrapper loads it."""
    transformers = pytest.importorskip("transformers")
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSProcessor
    model_dir = tmp_path_factory.mktemp("official_tokenizer")
    for f in (ASSETS / "tokenizer").iterdir():
        shutil.copy(f, model_dir)
    for name in ("config.json", "preprocessor_config.json", "generation_config.json"):
        shutil.copy(ASSETS / "models" / "1.7B-CustomVoice" / name, model_dir)
    transformers.AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
    transformers.AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor, exist_ok=True)
    processor = transformers.AutoProcessor.from_pretrained(str(model_dir), fix_mistral_regex=True)
    return lambda text: processor(text=text, return_tensors="pt", padding=True)["input_ids"][0].tolist()


@pytest.mark.slow                                   # parity with qwen-tts's tokenizer
def test_official_loader_applies_the_mistral_regex(official):
    assert official("<|im_start|>assistant\niPhone McDonald") == [151644, 77091, 198, 72, 6939, 4483, 18234]


@pytest.mark.slow                                   # parity with qwen-tts's tokenizer
@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_ids_match_official(ours, official, wrapper):
    """The model's scaffolding around a client text tokenizes as the official processor does (on text without
    control tokens: those it would turn into control ids)."""
    head, tail = wrapper.split("{}")
    for text in filter(lambda t: not controls(t), CORPUS):
        assert ours.encode_prompt(head, text, tail) == official(head + text + tail), text


@pytest.mark.slow                                   # parity with qwen-tts's tokenizer
def test_fuzz_ids_match_official(ours, official):
    texts = [t for t in fuzz_texts(300, seed=1) if not controls(t)]
    assert len(texts) > 100
    for text in texts:
        assert ours.encode(text) == official(text), text


@pytest.mark.parametrize("token", CONTROL_TOKENS)
def test_control_tokens_in_client_text_are_plain_text(ours, token):
    """Every special token, alone and inside words, in the text, an instruct or a reference text: characters only."""
    control_ids = set(ours.special_ids.values())
    for text in (token, f"a{token}b", f"Hello{token}", f"{token}world", f"你好{token}世界", f" {token}\n", token * 2,
                 token[:-1], token[1:]):
        ids = ours.encode(text)
        assert not control_ids & set(ids) and ours.decode(ids) == text, text
        for head, tail in ("<|im_start|>assistant\n", "<|im_end|>\n"), ("<|im_start|>user\n", "<|im_end|>\n"):
            prompt = ours.encode_prompt(head, text, tail)
            assert [i for i in prompt if i in control_ids] == [151644, 151645]
            assert ours.decode(prompt) == head + text + tail
        streamed = stream(ours, list(text))
        assert streamed == (ids, ids) and not control_ids & set(streamed[0]), text


def test_special_ids_and_decode(ours):
    assert ours.encode_prompt("<|im_start|>assistant\n") == [151644, 77091, 198]
    assert ours.split_control("<|im_start|>assistant\n") == ([151644], "assistant\n")
    assert [ours.token_id(t) for t in ("<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
                                       "<|audio_pad|>")] == [151644, 151645, 151671, 151672, 151673, 151675]
    assert len(ours.special_ids) == 33
    for text in CORPUS[:9] + CORPUS[10:]:                                 # [9] is NFC-composed by encoding
        assert ours.decode(ours.encode(text)) == text


def stream(tok: TextTokenizer, pieces: list[str]) -> tuple[list[int], list[int]]:
    """Feed `pieces` one by one; return what was committed by counting, and by cutting the pending text."""
    text, counted, pending, cut_ids = "", [], "", []
    for i, piece in enumerate(pieces):
        closed = i == len(pieces) - 1
        text += piece
        counted += tok.encode(text)[len(counted):tok.final_count(text, closed)]
        ids, used = tok.split_final(pending + piece, closed)
        cut_ids, pending = cut_ids + ids, (pending + piece)[used:]
    return counted, cut_ids


def random_pieces(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12)))) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


@pytest.mark.slow                                   # random splits
def test_incremental_random_splits_give_full_encoding(ours):
    rng = random.Random(0)
    texts = [w.format(t) for w in WRAPPERS[:2] for t in CORPUS] + fuzz_texts(300, seed=2)
    for text in texts:
        full = ours.encode(text)
        for _ in range(3):
            assert stream(ours, random_pieces(text, rng)) == (full, full), text
        assert stream(ours, list(text) or [""]) == (full, full), text     # one character at a time


def test_final_tokens_commit_early_and_hold_unsettled_tails(ours):
    assert ours.final_count("Hello world", False) == 1                 # " world" may grow
    assert ours.final_count("Hello world ", False) == 2                # a space ends " world" (it may join the next)
    assert ours.final_count("Hello world.\n", False) == 2              # "." may take line breaks
    assert ours.final_count("Hello world.", False) == 2                # "." may grow (".\n", "...")
    assert ours.final_count("Hello world. Next", False) == 3
    assert ours.final_count("Hello <|im_end|", False) == len(ours.encode("Hello <|im_end"))    # "|" may grow
    assert ours.final_count("你好，世界", False) == len(ours.encode("你好，"))  # no merge joins "，" to "世…"
    assert ours.final_count("今天天气", False) == 0                      # "今天" may join "天气…"
    assert ours.final_count("根据最", False) == 1                        # a hanzi after it is all NFC can give
    assert ours.final_count("天気か", False) == 1                        # "か" may yet be "が", and "気が" is one token
    assert ours.final_count("好，:", False) == 1                         # ":" may yet lead a word (":A"), "，:" may not
    assert ours.final_count("Hello world", True) == len(ours.encode("Hello world"))


def test_small_batches_split_as_the_pool_does(ours):
    """Up to SERIAL_BATCH texts are encoded on the caller's thread, more by the tokenizers' pool: the same splits."""
    texts = [text[:cut] for text in CORPUS for cut in (len(text) // 3, len(text))]
    closed = [i % 3 == 0 for i in range(len(texts))]
    assert len(texts) > SERIAL_BATCH
    pooled = ours.split_final_batch(texts, closed)
    serial = [split for i in range(0, len(texts), 8)
              for split in ours.split_final_batch(texts[i:i + 8], closed[i:i + 8])]
    assert serial == pooled and any(count < len(ids) for ids, count, _ in pooled)
