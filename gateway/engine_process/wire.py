"""A batch of messages (messages.py, engine.api.commands) as the socket carries it: one pickled list."""
import pickle
from pathlib import Path

import zmq


def dumps(messages: list) -> bytes:
    return pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> list:
    messages = pickle.loads(data)
    if not isinstance(messages, list):
        raise ValueError(f"a batch is a list of messages, not {type(messages).__name__}")
    return messages


def socket(ctx, kind: int, identity: bytes | None = None):
    """A DEALER (a front end) or ROUTER (the core) that never drops or holds back a message."""
    sock = ctx.socket(kind)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    for option in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
        sock.setsockopt(option, 0)
    return sock


def failure_path(address: str) -> Path:
    """Where an engine core that could not start leaves the one line saying why, beside its socket."""
    return Path(address.removeprefix("ipc://")).with_name("failure")
