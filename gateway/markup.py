"""What of an LLM's text is markup, not speech: the patterns of <think> blocks, markdown syntax and emoji.
Every pattern is bounded, so that the text a streaming filter holds back waiting for one to complete is too."""
import regex

PICTURE = r"[\p{Extended_Pictographic}\p{Emoji_Modifier}\p{Regional_Indicator}]"
EMOJI_PART = r"[\uFE0F\u20E3\p{Emoji_Modifier}\U000E0020-\U000E007F]"

# at a line's start (markdown)
FENCE = regex.compile(r"[ \t]{0,3}(?:```|~~~)[^\n]{0,200}(?:\n|\Z)")       # its line dropped; code inside is kept
RULE = regex.compile(r"[ \t]{0,3}([-*_])(?:[ \t]{0,16}\1){2,64}[ \t]{0,16}(?:\n|\Z)")
HEADING = regex.compile(r"[ \t]{0,3}#{1,6}[ \t]{1,16}")
BULLET = regex.compile(r"[ \t]{0,16}[-*+•][ \t]{1,16}")
QUOTE = regex.compile(r"[ \t]{0,3}(?:>[ \t]?){1,8}")

# anywhere
THINK_OPEN = regex.compile(r"<think>")
THINK_CLOSE = regex.compile(r"</think>")
ESCAPE = regex.compile(r"\\[!-/:-@\[-`{-~]")                               # the character after it is literal
LINK_OPEN = regex.compile(r"!?\[")
LINK_TARGET = regex.compile(r"\]\([^()\s]{0,2048}\)")
LINK_CLOSE = regex.compile(r"\]")
STARS, UNDERSCORES, TILDES, BACKTICKS = (regex.compile(rf"{marker}{{{least},64}}")       # runs of emphasis or code
                                        for marker, least in ((r"\*", 1), ("_", 1), ("~", 2), ("`", 1)))
EMOJI = regex.compile(rf"(?:{PICTURE}|{EMOJI_PART})(?:{PICTURE}|{EMOJI_PART}|\u200D){{0,64}}")   # a ZWJ only inside

LINE_RULES = (FENCE, RULE, HEADING, BULLET, QUOTE)
MARKDOWN_RULES = (ESCAPE, LINK_OPEN, LINK_TARGET, LINK_CLOSE, STARS, UNDERSCORES, TILDES, BACKTICKS)
THINK_RULES = (THINK_OPEN, THINK_CLOSE)

MARKDOWN_TRIGGERS = r"[\\!\[\]*_~`]"


def triggers(think: bool, markdown: bool, emoji: bool) -> regex.Pattern:
    """Where a run of plain text stops: a character some enabled rule may start at, or a newline."""
    parts = [r"\n"] + ["<"] * think + [MARKDOWN_TRIGGERS] * markdown + [PICTURE, EMOJI_PART, r"\u200D"] * emoji
    return regex.compile("|".join(parts))


def emphasis_kept(marker: str, before: str, after: str | None) -> bool:
    """A lone `*` between spaces is a times sign and an `_` inside a word is part of it: neither is emphasis."""
    if marker[0] == "*":
        return marker == "*" and before.isspace() and after is not None and after.isspace()
    return before.isalnum() and after is not None and after.isalnum()
