"""The subcommands of `qwen-tts-gateway`, a module each: its parser (`add_parser`) and its run (`run`)."""
import argparse


def add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint directory or hub repo id")
    src.add_argument("--dummy", metavar="VARIANT", help="random weights: tiny, tiny-<variant> or a published variant")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="float32|bfloat16|float16 (default: float32 on CPU, bfloat16 on CUDA)")
