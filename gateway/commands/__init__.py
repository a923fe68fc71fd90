"""The subcommands of `qwen-tts-gateway`, a module each: its parser (`add_parser`) and its run (`run`)."""
import argparse

from .. import cache_dir


class DefaultsShown(argparse.HelpFormatter):
    """Every option's default in its help, unless the help already says it or there is none to say."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "default" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


def dummy_variants() -> list[str]:
    from engine.models.qwen3_tts import VARIANTS
    return ["tiny", *(f"tiny-{v}" for v in VARIANTS), *VARIANTS]


def add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="DIR_OR_ID",
                     help="checkpoint directory (as published, with its speech_tokenizer/) or hub repo id, "
                          "e.g. Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice")
    src.add_argument("--dummy", metavar="VARIANT", choices=dummy_variants(),
                     help="random weights of the real architecture: tiny (fast on a CPU), tiny-<variant> (its "
                          "layout, small) or a published variant; one of: %(choices)s")
    add_device_args(p)
    cache_dir.add_argument(p)


def add_device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="default: float32 on a CPU, bfloat16 on CUDA")
