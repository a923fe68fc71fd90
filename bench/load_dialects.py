"""What a load-bench socket says, in our protocol or a vendor's dialect (the gateway's Cartesia and ElevenLabs
routes): the URL, the frames of a context's text, end and cancel, and the server's frames read back as ours."""
import base64
import json
from collections import defaultdict
from urllib.parse import urlencode

from qwen_tts_client import protocol as p

DIALECTS = ("ours", "cartesia", "elevenlabs")
MAX_CONTEXTS = 16            # the dialects announce no limit: the server's default


def wire(dialect: str, options: dict, rate: int, encoding: str):
    return {"ours": Ours, "cartesia": Cartesia, "elevenlabs": ElevenLabs}[dialect](options, rate, encoding)


def url(dialect: str, base: str, voice: str | None, rate: int, encoding: str) -> str:
    """`base`: ws(s)://host:port."""
    if dialect == "cartesia":
        return f"{base}/tts/websocket?cartesia_version=2025-04-16"
    if dialect == "elevenlabs":
        return f"{base}/v1/text-to-speech/{voice}/multi-stream-input?model_id=bench&output_format=pcm_{rate}"
    return f"{base}/v1/tts/websocket?{urlencode(p.StreamFormat(rate, encoding).to_query())}"


def headers(dialect: str, key: str | None) -> dict:
    name, value = {"cartesia": ("X-API-Key", key), "elevenlabs": ("xi-api-key", key)}.get(
        dialect, ("Authorization", f"Bearer {key}"))
    return {name: value} if key else {}


class Ours:
    def __init__(self, options: dict, rate: int, encoding: str):
        self.options = options

    async def ready(self, ws) -> p.Ready | p.Error:
        return p.parse_server(await ws.recv())

    def text(self, cid: str, piece: str, first: bool, end: bool = False) -> list[str]:
        """`end`: the context's only message (a whole text: the gateway's whole-text layout)."""
        return [p.encode(p.Text(cid, piece, **self.options, end=end) if first else p.Text(cid, piece))]

    def end(self, cid: str) -> list[str]:
        return [p.encode(p.End(cid))]

    def cancel(self, cid: str, played_ms: float | None = None) -> list[str]:
        return [p.encode(p.Cancel(cid, played_ms))]

    def decode(self, frame: str | bytes) -> list[p.ServerMessage]:
        return [p.unpack_audio(frame) if isinstance(frame, bytes) else p.parse_server(frame)]


class Dialect(Ours):
    """A vendor's socket: no `ready` (a refusal is the handshake's), audio offsets counted here."""

    def __init__(self, options: dict, rate: int, encoding: str):
        super().__init__(options, rate, encoding)
        self.rate, self.offsets = rate, defaultdict(int)

    async def ready(self, ws) -> p.Ready:
        return p.Ready("", self.rate, "pcm_s16le", MAX_CONTEXTS, [])

    def audio(self, cid: str, b64: str) -> p.Audio:
        data = base64.b64decode(b64)
        msg = p.Audio(cid, 0, self.offsets[cid], data)
        self.offsets[cid] += len(data) // 2
        return msg


class Cartesia(Dialect):
    def _request(self, cid: str, transcript: str, more: bool) -> str:
        return json.dumps({"context_id": cid, "model_id": "sonic-3", "transcript": transcript, "continue": more,
                           "voice": {"mode": "id", "id": self.options.get("voice")}, "language":
                           self.options.get("language"), "add_timestamps": self.options.get("word_timestamps", False),
                           "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": self.rate}})

    def text(self, cid: str, piece: str, first: bool, end: bool = False) -> list[str]:
        return [self._request(cid, piece, not end)]

    def end(self, cid: str) -> list[str]:
        return [self._request(cid, "", False)]

    def cancel(self, cid: str, played_ms: float | None = None) -> list[str]:
        return [json.dumps({"context_id": cid, "cancel": True})]

    def decode(self, frame: str | bytes) -> list[p.ServerMessage]:
        d = json.loads(frame)
        cid, kind = d.get("context_id"), d.get("type")
        if kind == "chunk":
            return [self.audio(cid, d["data"])]
        if kind == "timestamps":
            stamps = d["word_timestamps"]
            return [p.Words(cid, stamps["words"], stamps["start"], stamps["end"], [], [])]
        if kind == "done":
            return [p.Done(cid, 0.0)]
        if kind == "error":
            return [p.Error(d.get("error_code") or "error", d.get("message", ""), False, cid)]
        return []


class ElevenLabs(Dialect):
    def __init__(self, options: dict, rate: int, encoding: str):
        super().__init__(options, rate, encoding)
        self.clock_ms = defaultdict(int)             # its alignment restarts per message: the sum of their spans

    def text(self, cid: str, piece: str, first: bool, end: bool = False) -> list[str]:
        return [json.dumps({"text": piece, "context_id": cid})] + (self.end(cid) if end else [])

    def end(self, cid: str) -> list[str]:
        return [json.dumps({"context_id": cid, "flush": True}), json.dumps({"context_id": cid, "close_context": True})]

    def cancel(self, cid: str, played_ms: float | None = None) -> list[str]:
        return [json.dumps({"context_id": cid, "close_context": True})] * 2      # a second close stops it at once

    def decode(self, frame: str | bytes) -> list[p.ServerMessage]:
        d = json.loads(frame)
        cid = d.get("contextId")
        if d.get("error"):
            return [p.Error(d["error"], d.get("message", ""), False, cid)]
        if d.get("audio"):
            return [self.audio(cid, d["audio"])]
        if d.get("isFinal"):
            return [p.Done(cid, 0.0)]
        if alignment := d.get("alignment"):
            self.clock_ms[cid] += alignment["charStartTimesMs"][-1] + alignment["charDurationsMs"][-1]
            return [p.Words(cid, [""], [0.0], [self.clock_ms[cid] / 1000], [], [])]
        return []
