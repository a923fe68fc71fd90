"""A batch of messages (messages.py, engine.api.commands) as the socket carries it: one pickled list, its large arrays
(a batch's joined PCM, messages.Chunks) out of band, each a frame of its own: never copied into the pickle, nor out
of it."""
import pickle
from pathlib import Path

import zmq


IN_BAND = 1 << 16        # smaller buffers ride inside the pickle: a frame of their own would cost more than their copy


def dumps(messages: list) -> list:
    """The batch's frames: the pickle, then its out-of-band buffers."""
    buffers = []
    head = pickle.dumps(messages, protocol=5, buffer_callback=lambda b: b.raw().nbytes < IN_BAND or buffers.append(b))
    return [head, *buffers]


def loads(frames: list) -> list:
    """Arrays sent out of band come back read-only, over the received frames' memory."""
    messages = pickle.loads(frames[0], buffers=frames[1:])
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
