"""Cartesia's `/tts/websocket` dialect: its generation requests and cancels in, its chunk/timestamps/done out."""
import base64
import uuid

from qwen_tts_client import protocol as p

from ..http_api import auth_headers
from .bridge import DialectError, json_body
from .settings import Ignored, language, to_f32le, tokens, voice

ENCODINGS = {"pcm_s16le": "pcm_s16le", "pcm_f32le": "pcm_s16le", "pcm_mulaw": "mulaw", "pcm_alaw": "alaw"}
SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
STATUS = {p.UNAUTHORIZED: 401, p.BUSY: 429, p.TOO_MANY_CONTEXTS: 429, p.NOT_READY: 503, p.SHUTTING_DOWN: 503,
          p.INTERNAL: 500, p.GENERATION_FAILED: 500, p.SLOW_CONSUMER: 408, p.CONTEXT_TIMEOUT: 408}
IGNORED = ("generation_config", "speed", "duration", "pronunciation_dict_id", "add_phoneme_timestamps")


def error_body(code: str, message: str, context_id: str | None = None) -> dict:
    return {"type": "error", "context_id": context_id, "status_code": STATUS.get(code, 400), "done": True,
            "title": code, "error_code": code, "message": message, "error": message}


def output_format(body, cid: str | None = None) -> tuple[str, int]:
    """Cartesia's `output_format` -> (its encoding, sample rate), or a DialectError saying what is possible."""
    fmt = body if isinstance(body, dict) else {}
    encoding, rate, container = fmt.get("encoding"), fmt.get("sample_rate"), fmt.get("container", "raw")
    if container != "raw":
        raise DialectError(p.INVALID_PARAMETER, f"output_format.container {container!r} is not supported: use 'raw'",
                           cid)
    if encoding not in ENCODINGS:
        raise DialectError(p.INVALID_PARAMETER, f"output_format.encoding must be one of {', '.join(ENCODINGS)}", cid)
    if rate not in SAMPLE_RATES:
        raise DialectError(p.INVALID_PARAMETER, f"output_format.sample_rate must be one of {SAMPLE_RATES}", cid)
    return encoding, rate


def voice_name(gateway, spec, cid: str | None = None) -> str:
    """`{"mode": "id", "id": ...}` -> our voice, or a DialectError naming the voices there are."""
    spec = spec if isinstance(spec, dict) else {}
    if spec.get("mode", "id") != "id" or not isinstance(spec.get("id"), str):
        raise DialectError(p.UNKNOWN_VOICE, "voice must be {\"mode\": \"id\", \"id\": VOICE}: a speaker or "
                                            "registered voice of this server (embeddings are not supported)", cid)
    name = voice(gateway, spec["id"])
    if name is None:
        raise DialectError(p.UNKNOWN_VOICE, f"voice {spec['id']!r} not found; this server has: "
                           f"{', '.join(gateway.voices())} (or a `serve --voice-map` alias)", cid)
    return name


class Cartesia:
    def __init__(self, gateway):
        self.gateway = gateway
        self.format: p.StreamFormat | None = None      # set by the socket's first generation request
        self.encoding = ""                             # Cartesia's name of it (pcm_f32le is converted here)
        self.open: dict[str, str] = {}                 # contexts that have not ended: their text so far
        self.closing = False
        self.ignored = Ignored("cartesia")

    def check_socket(self, gateway) -> p.Error | None:
        return None

    def auth_headers(self, ws) -> dict:
        return auth_headers(ws.headers, ws.query_params, "x-api-key")

    def from_client(self, text: str | None) -> list:
        body = json_body(text)
        cid = body.get("context_id") or uuid.uuid4().hex
        if not isinstance(cid, str):
            raise DialectError(p.INVALID_MESSAGE, "context_id must be a string")
        if body.get("cancel"):
            return [p.Cancel(cid)] if cid in self.open else []
        transcript = body.get("transcript", "")
        if not isinstance(transcript, str):
            raise DialectError(p.INVALID_MESSAGE, "transcript must be a string", cid)
        if cid in self.open:
            messages = [p.Text(cid, transcript)] if transcript else []
        else:
            messages = [self._start(body, cid, transcript)]
        self.open[cid] += transcript
        if body.get("flush"):
            messages.append(p.Flush(cid))
        if not body.get("continue", False):
            messages.append(p.End(cid))
        return messages

    def _start(self, body: dict, cid: str, transcript: str) -> p.Text:
        encoding, rate = output_format(body.get("output_format"), cid)
        if self.format is None:
            self.format, self.encoding = p.StreamFormat(rate, ENCODINGS[encoding], "binary"), encoding
        elif (encoding, rate) != (self.encoding, self.format.sample_rate):
            raise DialectError(p.INVALID_PARAMETER, f"this socket speaks {self.encoding} at "
                               f"{self.format.sample_rate} Hz (its first request's output_format): open another "
                               "socket for another format", cid)
        name = voice_name(self.gateway, body.get("voice"), cid)
        for key in IGNORED:
            self.ignored.note(key, body.get(key))
        self.ignored.note("voice.__experimental_controls", body["voice"].get("__experimental_controls"))
        self.open[cid] = ""
        return p.Text(cid, transcript, voice=name, language=language(body.get("language")),
                      word_timestamps=bool(body.get("add_timestamps", False)))

    async def encoded(self, msg: p.Audio) -> p.Audio:
        return msg                                     # as our session encodes it (pcm_f32le: in to_client)

    def to_client(self, msg) -> list[dict]:
        cid = getattr(msg, "context_id", None)
        head = {"context_id": cid, "status_code": 206, "done": False}
        if isinstance(msg, p.Audio):
            data = to_f32le(msg.data) if self.encoding == "pcm_f32le" else msg.data
            return [{"type": "chunk", **head, "data": base64.b64encode(data).decode("ascii"), "step_time": 0.0}]
        if isinstance(msg, p.Words):
            words = tokens(self.open.get(cid, ""), msg.char_start, msg.char_end)
            stamps = {"words": words, "start": msg.start, "end": msg.end}
            return [{"type": "timestamps", **head, "word_timestamps": stamps}]
        if isinstance(msg, p.Flushed):
            return [{"type": "flush_done", **head, "flush_done": True, "flush_id": msg.flush_id}]
        if isinstance(msg, p.Error) and msg.code in p.WORDS_ONLY:
            return []                                  # the audio goes on untimed; the server logs why
        if isinstance(msg, (p.Done, p.Cancelled, p.Error)):
            self.open.pop(cid, None)
        if isinstance(msg, p.Done):
            return [{"type": "done", **head, "done": True}]
        if isinstance(msg, p.Error):
            return [self.error(msg.code, msg.message, cid)]
        return []                                      # ready, cancelled: Cartesia has no such message

    def error(self, code: str, message: str, context_id: str | None) -> dict:
        return error_body(code, message, context_id)

