"""The little of WebSocket framing the proxy needs, through websockets' sans-I/O parts: where the replica's frames
end in the bytes it relays (so that it may add its own at a boundary), and the frames it sends itself."""
from websockets.frames import Close, Frame, Opcode
from websockets.streams import StreamReader
from websockets.utils import accept_key

from qwen_tts_client import protocol as p


class ServerFrames:
    """Follows the replica's side of a socket: its HTTP response head, then its frames."""

    def __init__(self):
        self.head = b""
        self.opened = False         # the replica answered 101: frames follow
        self.closed = False         # the replica sent its close frame (or refused the upgrade)
        self.reader = StreamReader()
        self.in_frame = 0           # bytes of the current frame parsed so far
        self.parser = self._parse()
        next(self.parser)

    @property
    def at_boundary(self) -> bool:
        return self.opened and not self.in_frame and not self.reader.buffer

    def feed(self, data: bytes) -> None:
        if not self.opened:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.opened = self.head.startswith(b"HTTP/1.1 101")
            self.closed = not self.opened
            data, self.head = self.head[end + 4:], b""
        self.reader.feed_data(data)
        next(self.parser)

    def _parse(self):
        while True:
            frame = yield from Frame.parse(self._read_exact, mask=False)
            self.closed |= frame.opcode is Opcode.CLOSE
            self.in_frame = 0

    def _read_exact(self, n: int):
        data = yield from self.reader.read_exact(n)
        self.in_frame += n
        return data


def error_and_close(code: str, message: str, close_code: int) -> bytes:
    """The protocol's socket-wide error (no context_id), then a close frame."""
    error = p.encode(p.Error(code, message, code in p.RETRYABLE)).encode()
    close = Close(close_code, code[:100]).serialize()
    return Frame(Opcode.TEXT, error).serialize(mask=False) + Frame(Opcode.CLOSE, close).serialize(mask=False)


def accept(key: str) -> bytes:
    """The handshake's answer: the proxy itself takes a socket that it refuses, to tell it why as the server does."""
    return (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n").encode()
