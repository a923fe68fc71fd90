"""The little WebSocket framing the proxy needs: frame boundaries in relayed bytes, and its own frames."""
import base64
import hashlib

from qwen_tts_client import protocol as p

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE = 0x1, 0x8


def _header(buf: bytes) -> tuple[int, int] | None:
    if len(buf) < 2:
        return None
    n, mask = buf[1] & 0x7F, 4 if buf[1] & 0x80 else 0
    size = 2 + {126: 2, 127: 8}.get(n, 0) + mask
    if len(buf) < size:
        return None
    return size, n if n < 126 else int.from_bytes(buf[2:size - mask], "big")


class ServerFrames:
    def __init__(self):
        self.head = b""
        self.opened = False         # the replica answered 101: frames follow
        self.pending = b""          # a frame header seen in part
        self.left = 0               # payload bytes of the current frame still to come
        self.closed = False         # the replica sent its close frame (or refused the upgrade)

    @property
    def at_boundary(self) -> bool:
        return self.opened and not self.left and not self.pending

    def feed(self, data: bytes) -> None:
        if not self.opened:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.opened, self.closed = self.head.startswith(b"HTTP/1.1 101"), not self.head.startswith(b"HTTP/1.1 101")
            data, self.head = self.head[end + 4:], b""
        i = 0
        while i < len(data):
            if self.left:
                step = min(self.left, len(data) - i)
                self.left, i = self.left - step, i + step
                continue
            buf = self.pending + data[i:i + 14]
            header = _header(buf)
            if header is None:                         # the rest of `data` is a part of the header
                self.pending = buf
                return
            self.closed |= buf[0] & 0x0F == CLOSE
            i += header[0] - len(self.pending)
            self.pending, self.left = b"", header[1]


def frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    return bytes([0x80 | opcode]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")) + payload


def error_and_close(code: str, message: str, close_code: int) -> bytes:
    error = p.encode(p.Error(code, message, code in p.RETRYABLE))
    return frame(TEXT, error.encode()) + frame(CLOSE, close_code.to_bytes(2, "big") + code.encode()[:100])


def accept(key: str) -> bytes:
    """The handshake's answer: the proxy accepts a socket it refuses, to tell it why as the server does."""
    token = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    return (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {token}\r\n\r\n").encode()
