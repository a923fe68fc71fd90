"""Qwen2 byte-level BPE, token for token as the reference processor tokenizes (built on `tokenizers` only).

The reference loads its processor with `fix_mistral_regex=True`. transformers 4.57.x then swaps the Qwen2 split
regex for the Mistral one below when the tokenizer comes from a local directory (or HF offline mode) whose
config.json has no transformers_version or one in (4.57.2, 5.0): the published configs say 4.57.3. So "iPhone"
splits as "i|Phone". We always use the swapped regex, whatever transformers version is installed."""
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from .config import ASSETS

SPLIT_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


class TextTokenizer:

    def __init__(self, tokenizer: Tokenizer, added_tokens: dict[str, int]):
        self._tok = tokenizer
        self.special_ids = added_tokens          # "<|im_start|>" -> 151644, "<tts_pad>" -> 151671, ...
        self._added_ids = set(added_tokens.values())
        self._added_prefixes = {t[:i] for t in added_tokens for i in range(1, len(t))}
        self._longest_added = max(map(len, added_tokens))

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
        # All are matched in the raw text before normalization, special or not (normalized=False).
        tok.add_special_tokens([AddedToken(t["content"], special=t["special"], normalized=False) for _, t in added])
        return cls(tok, {t["content"]: int(i) for i, t in added})

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        return self.special_ids[token]

    def final_count(self, text: str, closed: bool) -> int:
        """How many leading tokens of encode(text) stay the same whatever text is appended later."""
        return len(self.split_final(text, closed)[0])

    def split_final(self, text: str, closed: bool) -> tuple[list[int], int]:
        """(final leading ids, n): for any appended s, encode(text + s) == ids + encode(text[n:] + s).

        Pre-token pieces are final up to, not including, the piece holding the last settled character.
        Matching a piece reads at most one character past it, or to the end of a whitespace run, so a
        settled character that is not whitespace fences off everything before its piece. NFC can only
        rewrite the last base character and the marks after it, which always sit in that held piece."""
        enc = self._tok.encode(text, add_special_tokens=False)
        if closed:
            return enc.ids, len(text)
        limit = self._settled_end(text)
        ids, words, count, cut = enc.ids, enc.word_ids, 0, 0
        # A piece ends where the next begins: `tokenizers` misplaces the end offset of an NFC-composed character.
        ends = [start for start, _ in enc.offsets[1:]] + [len(text)] * bool(ids)
        for i, end in enumerate(ends):
            if i + 1 < len(ids) and words[i + 1] == words[i]:
                continue                        # not the last token of its piece
            if not (end < limit or end == limit and ids[i] in self._added_ids):
                break
            count, cut = i + 1, end
        return enc.ids[:count], cut

    def _settled_end(self, text: str) -> int:
        """End of the text that no appended text can change: before a possible start of an added token
        (its match would end the text segment there), then before trailing whitespace."""
        first = max(0, len(text) - self._longest_added)
        end = next((p for p in range(first, len(text)) if text[p:] in self._added_prefixes), len(text))
        while end and text[end - 1].isspace():     # str.isspace covers the regex's \s
            end -= 1
        return end
