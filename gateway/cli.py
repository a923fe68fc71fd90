"""`qwen-tts-gateway`: synth (one utterance to a WAV file), serve (the gateway), align (word timestamps)."""
import argparse
import logging
import sys

from . import fatal
from .commands import align, serve, synth


class Parser(argparse.ArgumentParser):
    """A bad flag is one line, not the whole usage first (serve's is long)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> tuple[Parser, dict[str, argparse.ArgumentParser]]:
    parser = Parser(prog="qwen-tts-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {}
    for command in (synth, serve, align):
        p = commands[command.__name__.rsplit(".", 1)[-1]] = command.add_parser(sub)
        p.add_argument("--log-level", type=str.lower, choices=fatal.LOG_LEVELS,
                       default="info" if command is serve else "warning",
                       help="debug also prints the traceback of a fatal error (default: %(default)s)")
    return parser, commands


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser()[0].parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            return serve.run(args, argv[1:])
        return {"synth": synth, "align": align}[args.command].run(args)
    except Exception as exc:
        if args.log_level == "debug":
            raise
        print(f"error: {fatal.one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
