"""`qwen-tts-gateway`: synth (one utterance to a WAV file), serve (the gateway), align (word timestamps)."""
import argparse
import sys

from .commands import align, serve, synth


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="qwen-tts-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (synth, serve, align):
        command.add_parser(sub)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve.run(args, argv[1:])
        return {"synth": synth, "align": align}[args.command].run(args)
    except Exception as exc:
        from engine import EngineInputError, ModelLoadError
        if isinstance(exc, (EngineInputError, ModelLoadError, FileNotFoundError)):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
