"""Qwen2 byte-level BPE as the reference processor tokenizes, with the Mistral split regex fix_mistral_regex selects.
Client text is plain text: only the model's own prompt scaffolding (encode_prompt) yields control ids."""
import hashlib
import json
import re
from collections import defaultdict
from functools import lru_cache
import unicodedata
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from engine.models.qwen3_tts.config import ASSETS
from engine.models.qwen3_tts.nfc_boundaries import settled_span

SPLIT_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
WORD_HEAD = {"Lu", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"}
# Hangul jamo, CJK punctuation, kana, Hangul compatibility jamo, ideographs, Hangul syllables, full/half-width forms
CJK = re.compile("[\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                 "\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")
CJK_LOOKAHEAD = 4       # characters after a boundary inside a run: the longest ideograph token's length
ANY_LOOKAHEAD = 24      # the same for any other run with no boundary (a long compound, a run of symbols)
SERIAL_BATCH = 32       # texts a batch encodes on this thread: fewer cannot pay for waking (and spinning) rayon's pool
SHARED: dict = {}      # vocab and merges (the aligner's are the TTS model's), with control tokens or not -> built


SPLIT = pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated")


@lru_cache(maxsize=4096)
def read_as(c: str) -> str:
    """What SPLIT_REGEX reads `c` as (Python's Unicode tables may differ): "L" a letter, "N" a number, else ""."""
    return "L" if len(SPLIT.pre_tokenize_str("A" + c)) == 1 else "N" if len(SPLIT.pre_tokenize_str(c + c)) == 2 else ""


class TextTokenizer:

    def __init__(self, plain: Tokenizer, control: Tokenizer, added_tokens: dict[str, int], merges: dict,
                 exact: bool = False):
        self._tok, self._control_tok, self._merges = plain, control, merges
        self._bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        self.special_ids = added_tokens
        self._control = re.compile("|".join(map(re.escape, sorted(added_tokens, key=len, reverse=True))))
        self.lookahead = None if exact else (CJK_LOOKAHEAD, ANY_LOOKAHEAD)

    @classmethod
    def load(cls, dir: str | Path | None = None, exact: bool = False) -> "TextTokenizer":
        """`exact`: settle only ids no later text can change (no lookahead inside long runs)."""
        dir = Path(dir) if dir is not None else ASSETS / "tokenizer"
        config = json.loads((dir / "tokenizer_config.json").read_text())
        added = sorted(config["added_tokens_decoder"].items(), key=lambda kv: int(kv[0]))
        vocab, text = (dir / "vocab.json").read_bytes(), (dir / "merges.txt").read_bytes()
        key = hashlib.blake2b(vocab + b"\0" + text, digest_size=16).digest()
        plain, merges = cls._plain(dir, key, text)
        control = cls._control_bpe(dir, key, tuple((t["content"], t["special"]) for _, t in added))
        return cls(plain, control, {t["content"]: int(i) for i, t in added}, merges, exact)

    @classmethod
    def _plain(cls, dir: Path, key: bytes, text: bytes) -> tuple[Tokenizer, dict]:
        """Built once a process: the plain BPE is never changed, the merges only read."""
        if key not in SHARED:
            merges = defaultdict(list)             # (left, the right's first byte) -> the rights: who may join a token
            for line in text.decode("utf-8").splitlines()[1:]:
                left, right = line.split(" ")
                merges[left, right[0]].append(right)
            SHARED[key] = cls._bpe(dir), dict(merges)
        return SHARED[key]

    @classmethod
    def _control_bpe(cls, dir: Path, key: bytes, added: tuple) -> Tokenizer:
        """Built once a process per vocabulary and control tokens (the aligner has its own): never changed after."""
        if (key, added) not in SHARED:
            control = cls._bpe(dir)
            control.add_special_tokens([AddedToken(t, special=special, normalized=False) for t, special in added])
            SHARED[key, added] = control
        return SHARED[key, added]

    @staticmethod
    def _bpe(dir: Path) -> Tokenizer:
        tok = Tokenizer(models.BPE.from_file(str(dir / "vocab.json"), str(dir / "merges.txt")))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([SPLIT, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                   use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        return tok

    def encode(self, text: str) -> list[int]:
        """Plain text: `<|im_end|>` in a client's text is eight characters, never a control id."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_prompt(self, head: str, text: str = "", tail: str = "") -> list[int]:
        """The model's scaffolding `head` and `tail` keep their control tokens; the client's `text` between is plain."""
        ids, plain = self.split_control(head)
        found = self._control.search(tail)
        t = found.start() if found else len(tail)
        closing = self._control_tok.encode(tail[t:], add_special_tokens=False).ids
        return ids + self.encode(plain + text + tail[:t]) + closing

    def split_control(self, head: str) -> tuple[list[int], str]:
        """The ids of `head` up to its last control token, and the plain text after it."""
        h = max((m.end() for m in self._control.finditer(head)), default=0)
        return self._control_tok.encode(head[:h], add_special_tokens=False).ids, head[h:]

    def decode(self, ids) -> str:
        return self._control_tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        return self.special_ids[token]

    def final_count(self, text: str, closed: bool) -> int:
        return len(self.split_final(text, closed)[0])

    def split_final(self, text: str, closed: bool) -> tuple[list[int], int]:
        """For any appended s: encode(text + s) == ids + encode(text[n:] + s) (exact; else see `_ahead`)."""
        ids, count, cut = self._split(self._tok.encode(text, add_special_tokens=False), text, closed)
        return ids[:count], cut

    def split_final_batch(self, texts: list[str], closed: list[bool]) -> list[tuple[list[int], int, int]]:
        encodings = self._tok.encode_batch(texts, add_special_tokens=False) if len(texts) > SERIAL_BATCH else \
            [self._tok.encode(text, add_special_tokens=False) for text in texts]
        return [self._split(enc, text, c) for enc, text, c in zip(encodings, texts, closed)]

    def _split(self, enc, text: str, closed: bool) -> tuple[list[int], int, int]:
        """A piece is final before the one holding the last settled character, or when a space or tab follows it."""
        ids = enc.ids
        if closed:
            return ids, len(ids), len(text)
        limit, run = self._settled_end(text)
        words, offsets, count, cut, exact = enc.word_ids, enc.offsets, 0, 0, True
        # `tokenizers` misplaces the end offset of NFC-composed characters
        ends = [start for start, _ in offsets[1:]] + [len(text)] * bool(ids)
        for i, end in enumerate(ends):
            if offsets[i][1] == end and self._ahead(text, end, limit, ids[i]):
                count, cut = i + 1, end
            elif exact and not (i + 1 < len(ids) and words[i + 1] == words[i]):
                fenced = end < len(text) and text[end] in " \t" and not text[end - 1].isspace()
                exact = end < limit and end <= run or fenced
                count, cut = (i + 1, end) if exact else (count, cut)
        return ids, count, cut

    def _ahead(self, text: str, end: int, limit: int, token: int) -> bool:
        """A boundary inside a run far enough behind its last character that its BPE has settled there (the
        lookahead), or (CJK) one no later text can move."""
        if not 0 < end < limit or unicodedata.category(text[end])[0] == "M":
            return False
        cjk = CJK.match(text[end - 1]) or CJK.match(text[end])
        if self.lookahead is not None and end <= limit - self.lookahead[0 if cjk else 1]:
            return True
        # inside a run of symbols or spaces the tail may split otherwise ("，:" + "A" is two pre-tokens, ":A" one)
        word = read_as(text[end]) == "L" or read_as(text[end - 1])
        return bool(cjk) and bool(word) and self._proven(text, end, token)

    def _proven(self, text: str, end: int, token: int) -> bool:
        """No merge joins `token` (or the symbol ending it) with a symbol the text after it may begin with: BPE never
        crosses the boundary. Only characters NFC can no longer change count (a hanzi at the end does); 8 suffice."""
        after = settled_span(text, end, 8)
        if not after:
            return False
        known = "".join(s for s, _ in self._bytes.pre_tokenize_str(after))
        last = self._tok.id_to_token(token)
        return not any(right.startswith(known) or known.startswith(right)
                       for i in range(len(last)) for right in self._merges.get((last[i:], known[0]), ()))

    def _settled_end(self, text: str) -> tuple[int, int]:
        end = run = len(text)
        while run and unicodedata.category(text[run - 1]) in WORD_HEAD:
            run -= 1
        while end and text[end - 1].isspace():
            end -= 1
        return end, run
