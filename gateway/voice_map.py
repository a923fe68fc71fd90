"""OpenAI's voice names -> this model's voices: the default table, `serve --voice-map` entries over it, the lookup."""
import argparse

OPENAI_VOICES = {     # the OpenAI SDK's built-in voices -> the CustomVoice speakers nearest in character
    "alloy": "serena", "ash": "aiden", "ballad": "ryan", "coral": "vivian", "echo": "aiden", "fable": "ryan",
    "nova": "vivian", "onyx": "uncle_fu", "sage": "serena", "shimmer": "sohee", "verse": "ryan", "marin": "vivian",
    "cedar": "aiden",
}


def parse(text: str) -> dict[str, str]:
    """'alloy=ryan,nova=my_clone' -> the default table with these entries replaced or added."""
    table = dict(OPENAI_VOICES)
    for entry in filter(None, text.split(",")):
        alias, sep, voice = entry.partition("=")
        if not sep or not alias.strip() or not voice.strip():
            raise argparse.ArgumentTypeError(f"{entry!r} is not ALIAS=VOICE")
        table[alias.strip().lower()] = voice.strip()
    return table


def resolve(name: str | None, table: dict[str, str], voices: list[str], takes_voice: bool) -> str | None:
    """A model voice as is; an alias -> its voice where the model has one; else unchanged (engine: unknown_voice)."""
    known = {v.lower() for v in voices}
    if name is None or name.lower() in known or name.lower() not in table:
        return name
    if not takes_voice:
        return None
    return table[name.lower()] if table[name.lower()].lower() in known else name
