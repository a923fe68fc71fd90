"""Qwen2 byte-level BPE as the reference processor tokenizes, with the Mistral split regex fix_mistral_regex selects."""
import json
import re
import unicodedata
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from engine.models.qwen3_tts.config import ASSETS

SPLIT_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
WORD_HEAD = {"Lu", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"}


class TextTokenizer:

    def __init__(self, tokenizer: Tokenizer, added_tokens: dict[str, int]):
        self._tok = tokenizer
        self.special_ids = added_tokens
        self._added_ids = set(added_tokens.values())
        self._added_prefixes = {t[:i] for t in added_tokens for i in range(1, len(t))}
        self._longest_added = max(map(len, added_tokens))
        self._added_head = re.compile("[" + re.escape("".join({t[0] for t in added_tokens})) + "]")

    @classmethod
    def load(cls, dir: str | Path | None = None) -> "TextTokenizer":
        dir = Path(dir) if dir is not None else ASSETS / "tokenizer"
        tok = Tokenizer(models.BPE.from_file(str(dir / "vocab.json"), str(dir / "merges.txt")))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tok.decoder = decoders.ByteLevel()
        config = json.loads((dir / "tokenizer_config.json").read_text())
        added = sorted(config["added_tokens_decoder"].items(), key=lambda kv: int(kv[0]))
        tok.add_special_tokens([AddedToken(t["content"], special=t["special"], normalized=False) for _, t in added])
        return cls(tok, {t["content"]: int(i) for i, t in added})

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        return self.special_ids[token]

    def final_count(self, text: str, closed: bool) -> int:
        return len(self.split_final(text, closed)[0])

    def split_final(self, text: str, closed: bool) -> tuple[list[int], int]:
        """For any appended s: encode(text + s) == ids + encode(text[n:] + s)."""
        ids, count, cut = self._split(self._tok.encode(text, add_special_tokens=False), text, closed)
        return ids[:count], cut

    def split_final_batch(self, texts: list[str], closed: list[bool]) -> list[tuple[list[int], int, int]]:
        encodings = self._tok.encode_batch(texts, add_special_tokens=False)
        return [self._split(enc, text, c) for enc, text, c in zip(encodings, texts, closed)]

    def _split(self, enc, text: str, closed: bool) -> tuple[list[int], int, int]:
        """A piece is final before the one holding the last settled character, or when a space or tab follows it."""
        ids = enc.ids
        if closed:
            return ids, len(ids), len(text)
        limit, run, head = self._settled_end(text)
        words, count, cut = enc.word_ids, 0, 0
        # `tokenizers` misplaces the end offset of NFC-composed characters
        ends = [start for start, _ in enc.offsets[1:]] + [len(text)] * bool(ids)
        for i, end in enumerate(ends):
            if i + 1 < len(ids) and words[i + 1] == words[i]:
                continue
            fenced = end < head and text[end] in " \t" and not text[end - 1].isspace()
            if not (end < limit and end <= run or end == limit and ids[i] in self._added_ids or fenced):
                break
            count, cut = i + 1, end
        return ids, count, cut

    def _settled_end(self, text: str) -> tuple[int, int, int]:
        head = self._added_head.search(text, max(0, len(text) - self._longest_added))
        while head and text[head.start():] not in self._added_prefixes:
            head = self._added_head.search(text, head.start() + 1)
        end = head.start() if head else len(text)
        run = end
        while run and unicodedata.category(text[run - 1]) in WORD_HEAD:
            run -= 1
        head = end
        while end and text[end - 1].isspace():
            end -= 1
        return end, run, head
