"""ElevenLabs' `multi-stream-input` and `stream-input` dialect: text, flush, close_context in; audio, alignment,
isFinal out."""
import asyncio
import base64
from dataclasses import dataclass, replace

import numpy as np

from qwen_tts_client import protocol as p

from ..containers import ContainerEncoder
from ..http_api import auth_headers
from .bridge import DialectError, json_body
from .char_alignment import CharTimes
from .settings import Ignored, language, voice

ENCODINGS = {"pcm": "pcm_s16le", "ulaw": "mulaw", "alaw": "alaw"}
SAMPLE_RATES = {"pcm": (8000, 16000, 22050, 24000, 44100, 48000), "ulaw": (8000,), "alaw": (8000,)}
MP3 = {"mp3_22050_32", "mp3_24000_48", "mp3_44100_32", "mp3_44100_64", "mp3_44100_96", "mp3_44100_128",
       "mp3_44100_192"}
SINGLE = "stream"                  # stream-input's one context, by our protocol's name
CLOSE_NORMAL, CLOSE_POLICY = 1000, 1008


def stream_format(name: str | None) -> tuple[p.StreamFormat, int]:
    """`pcm_24000`, `ulaw_8000`, `mp3_44100_128` (the default) ... -> our format (MP3 is encoded from its PCM) and
    the MP3 bit rate in kbit/s (0: none); opus is refused with what is possible."""
    name = name or "mp3_44100_128"
    kind, _, rate = name.partition("_")
    if name in MP3:
        rate, _, kbps = rate.partition("_")
        return p.StreamFormat(int(rate), "pcm_s16le", "binary"), int(kbps)
    if kind not in ENCODINGS or not rate.isdigit() or int(rate) not in SAMPLE_RATES[kind]:
        formats = [f"{k}_{r}" for k, rates in SAMPLE_RATES.items() for r in rates] + sorted(MP3)
        raise DialectError(p.INVALID_PARAMETER, f"output_format {name} is not supported: use one of "
                                                f"{', '.join(formats)}")
    return p.StreamFormat(int(rate), ENCODINGS[kind], "binary"), 0


class Mp3:
    """A context's 16-bit PCM (at the socket's rate) -> MP3 frames as LAME has them; the final call drains it."""

    def __init__(self, rate: int, kbps: int):
        self.encoder = ContainerEncoder("mp3", streamed=True, rate=rate, bit_rate=1000 * kbps)

    def encode(self, pcm16: bytes, final: bool = False) -> bytes:
        return self.encoder.encode(np.frombuffer(pcm16, "<i2").astype(np.float32) / 32768, final)


def error_body(code: str, message: str, context_id: str | None = None) -> dict:
    body = {"message": message, "error": code, "code": CLOSE_POLICY}
    return {**body, "contextId": context_id} if context_id else body


def voice_name(gateway, voice_id: str) -> str:
    name = voice(gateway, voice_id)
    if name is None:
        raise DialectError(p.UNKNOWN_VOICE, f"A voice with voice_id {voice_id!r} was not found; this server has: "
                                            f"{', '.join(gateway.voices())} (or a `serve --voice-map` alias)")
    return name


@dataclass
class ContextState:
    times: CharTimes
    flushed: bool = False            # all its text so far is flushed: a close_context lets it be spoken
    closed: bool = False


class ElevenLabs:
    def __init__(self, gateway, ws, multi: bool):
        self.gateway, self.multi = gateway, multi
        query = ws.query_params
        self.voice_id = ws.path_params["voice_id"]
        self.language = language(query.get("language_code"))
        self.query_format = query.get("output_format")
        self.format: p.StreamFormat | None = None
        self.kbps = 0                    # MP3's bit rate; 0: the audio goes as our session encodes it
        self.mp3: dict[str, Mp3] = {}    # by context
        self.contexts: dict[str, ContextState] = {}
        self.closing = 0                 # a close code once the socket is to close after what is sent
        self.ignored = Ignored("elevenlabs")
        self.ignored.note("enable_ssml_parsing", query.get("enable_ssml_parsing") == "true" or None)

    def check_socket(self, gateway) -> p.Error | None:
        try:
            self.format, self.kbps = stream_format(self.query_format)
            self.voice = voice_name(gateway, self.voice_id)
        except DialectError as exc:
            return p.Error(exc.code, str(exc))
        return None

    def auth_headers(self, ws) -> dict:
        return auth_headers(ws.headers, ws.query_params, "xi-api-key")

    def from_client(self, text: str | None) -> list:
        body = json_body(text)
        cid = (body.get("context_id") or body.get("contextId")) if self.multi else SINGLE
        if body.get("close_socket"):
            return [{"type": "websocket.disconnect", "code": CLOSE_NORMAL}]
        if cid is None:
            return [p.Keepalive()]                   # {"text": ""} on no context: the documented keep-alive
        if not isinstance(cid, str):
            raise DialectError(p.INVALID_MESSAGE, "context_id must be a string")
        state = self.contexts.get(cid)
        if body.get("close_context"):
            return self._close(cid, state)
        piece = body.get("text")
        if piece is not None and not isinstance(piece, str):
            raise DialectError(p.INVALID_MESSAGE, "text must be a string", cid)
        if state is None:
            if not piece and self.multi:
                return [p.Flush(cid)] if body.get("flush") else [p.Keepalive()]
            state = self.contexts[cid] = ContextState(CharTimes())
            self.ignored.note("voice_settings", body.get("voice_settings"))
            self.ignored.note("pronunciation_dictionary_locators", body.get("pronunciation_dictionary_locators"))
            messages = [p.Text(cid, piece or "", voice=self.voice, language=self.language, word_timestamps=True)]
        elif piece == "" and not self.multi:
            return [p.End(cid)]                      # stream-input's end of input
        elif piece:
            messages = [p.Text(cid, piece)]
        elif not body.get("flush"):
            return [p.Keepalive(cid)]               # {"text": ""} on an open context: its keep-alive, no text
        else:
            messages = []
        if messages:
            state.times.text += messages[0].text
            state.flushed = False
        if body.get("flush"):
            messages.append(p.Flush(cid))
            state.flushed = True
        return messages

    def _close(self, cid: str, state: ContextState | None) -> list:
        """Ends a context whose text is all flushed (its audio is wanted); stops one with text unflushed, or closed
        a second time (the agent was interrupted), at once."""
        if state is None:
            return []
        graceful = state.flushed and not state.closed
        state.closed = True
        return [p.End(cid) if graceful else p.Cancel(cid)]

    async def encoded(self, msg: p.Audio) -> p.Audio:
        """An MP3 socket's PCM encoded off the event loop, so that LAME holds up no other socket."""
        if not self.kbps:
            return msg
        return replace(msg, data=await asyncio.to_thread(self._mp3(msg.context_id).encode, msg.data))

    def to_client(self, msg) -> list[dict]:
        """`msg`: an Audio message `encoded` first."""
        cid = getattr(msg, "context_id", None)
        state = self.contexts.get(cid)
        if isinstance(msg, p.Audio):
            return [self._audio(msg.data, cid)] if msg.data else []
        if isinstance(msg, p.Words):
            return [self._tagged(_alignment(state.times.words(msg)), cid)] if state else []
        if not isinstance(msg, (p.Done, p.Cancelled, p.Error)) or getattr(msg, "code", "") in p.WORDS_ONLY:
            return []                                # ready, flushed, no words (the server logs why)
        bodies = [self.error(msg.code, msg.message, cid)] if isinstance(msg, p.Error) else []
        if (mp3 := self.mp3.pop(cid, None)) and isinstance(msg, p.Done) and (rest := mp3.encode(b"", final=True)):
            bodies.append(self._audio(rest, cid))
        if isinstance(msg, p.Done) and state and (tail := state.times.tail()):
            bodies.append(self._tagged(_alignment(tail), cid))
        if cid is not None:
            self.contexts.pop(cid, None)
            bodies.append(self._tagged({"isFinal": True}, cid))
        if not self.multi:
            self.closing = CLOSE_POLICY if isinstance(msg, p.Error) else CLOSE_NORMAL
        return bodies

    def _mp3(self, cid: str) -> Mp3:
        if cid not in self.mp3:
            self.mp3[cid] = Mp3(self.format.sample_rate, self.kbps)
        return self.mp3[cid]

    def _audio(self, data: bytes, cid: str) -> dict:
        return self._tagged({"audio": base64.b64encode(data).decode("ascii")}, cid)

    def _tagged(self, body: dict, cid: str | None) -> dict:
        return {**body, "contextId": cid} if self.multi else body

    def error(self, code: str, message: str, context_id: str | None) -> dict:
        return error_body(code, message, context_id if self.multi else None)


def _alignment(chars: tuple[list[str], list[int], list[int]]) -> dict:
    alignment = dict(zip(("chars", "charStartTimesMs", "charDurationsMs"), chars))
    return {"audio": None, "alignment": alignment, "normalizedAlignment": alignment}

