"""What one client may make the server hold beyond GatewayConfig's limits (docs/protocol.md, Limits)."""
import argparse
from dataclasses import dataclass, field, fields


def _bound(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class Limits:
    max_pending_chars: int = _bound(20000, "characters of a context's text not spoken yet (a flush counts as one); "
                                           "beyond: too_much_pending_text")
    max_pending_chars_per_socket: int = _bound(50000, "the same over all the contexts of a socket")
    max_body_bytes: int = _bound(16 << 20, "bytes of a POST /v1/voices body: 413 before it is read (speech bodies: "
                                           "--max-message-bytes)")
    max_outbound_seconds: float = _bound(10.0, "a client this far behind a real-time player of its audio is a slow "
                                               "consumer: its contexts end (slow_consumer), the socket closes (1008)")
    max_outbound_bytes: int = _bound(4 << 20, "bytes a client may leave untaken before it is a slow consumer")
    idle_release: float = _bound(3.0, "seconds an open utterance keeps its engine slot with no new text or audio "
                                      "(keepalives do not count); its later text starts a new engine request")
    ws_ping_interval: float = _bound(20.0, "seconds between WebSocket pings")
    ws_ping_timeout: float = _bound(20.0, "seconds a ping may go unanswered before the socket closes (1011)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for f in fields(Limits):
        parser.add_argument("--" + f.name.replace("_", "-"), type=f.type, default=f.default, help=f.metadata["help"])


def from_args(args: argparse.Namespace) -> Limits:
    return Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})
