"""QwenTTSService: a Pipecat WebsocketTTSService speaking through the gateway, one gateway context per turn."""
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame, TTSStoppedFrame
from pipecat.processors.frame_processor import FrameProcessorSetup
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TextAggregationMode, WebsocketTTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, NotGiven
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from .. import protocol as p

from ..connection import (SPEECH_OPTIONS, Endpoint, GatewayError, gateway_language, open_socket, server_messages,
                          speech_options)
from ..word_pieces import WordPieces

CONTEXT_SETTINGS = {"voice", "language", "instruct"}


@dataclass
class QwenTTSSettings(TTSSettings):
    instruct: str | None | NotGiven = field(default_factory=lambda: NOT_GIVEN)


class QwenTTSService(WebsocketTTSService):
    Settings = QwenTTSSettings
    _settings: QwenTTSSettings

    def __init__(self, *, base_url: str = "ws://127.0.0.1:8000", api_key: str | None = None, voice: str | None = None,
                 language: Language | str = "auto", instruct: str | None = None, model: str = "qwen3-tts",
                 connect_timeout: float = 10.0, keepalive: float = 10.0, **kwargs):
        """`voice`, `language` (a Language or gateway name, 'auto'), `instruct`: as in the gateway's `text` message.
        Speech options (temperature, ..., word_timestamps) and the base classes' arguments are keyword arguments;
        text_aggregation_mode defaults to TOKEN: the gateway speaks text as it arrives."""
        self._options = speech_options(**{k: kwargs.pop(k) for k in list(kwargs) if k in SPEECH_OPTIONS})
        kwargs.setdefault("text_aggregation_mode", TextAggregationMode.TOKEN)
        super().__init__(push_text_frames=False, push_start_frame=True, pause_frame_processing=False,
                         settings=QwenTTSSettings(model=model, voice=voice, language=language, instruct=instruct),
                         **kwargs)
        self._base_url, self._api_key = base_url, api_key
        self._timeout, self._keepalive = connect_timeout, keepalive
        self._endpoint: Endpoint | None = None
        self._rate = p.DEFAULT_SAMPLE_RATE
        self._receive_task = None
        self._texts: dict[str, WordPieces] = {}    # the text of each context the gateway has and has not ended

    def can_generate_metrics(self) -> bool:
        return True

    def language_to_service_language(self, language: Language) -> str | None:
        return gateway_language(str(language.value))

    async def setup(self, setup: FrameProcessorSetup):
        await super().setup(setup)
        self._rate = self.sample_rate if self.sample_rate in p.SAMPLE_RATES else 24000   # the transport resamples
        self._endpoint = Endpoint(self._base_url, self._api_key, self._rate)
        await self._connect()

    async def _connect(self):
        await super()._connect()
        await self._connect_websocket()
        if self._websocket and (not self._receive_task or self._receive_task.done()):
            self._receive_task = self.create_task(self._receive_task_handler(self._report_error))
        self._create_keepalive_task(self._keepalive)

    async def _disconnect(self):
        await super()._disconnect()
        await self._cancel_keepalive_task()
        if self._receive_task:
            await self.cancel_task(self._receive_task)
            self._receive_task = None
        await self._disconnect_websocket()

    async def _connect_websocket(self):
        if self._websocket and self._websocket.state is State.OPEN:
            return
        try:
            self._websocket, _ = await open_socket(self._endpoint, self._timeout, self._websocket_connect)
        except GatewayError as exc:
            await self.push_error(f"{self}: {exc}", exception=exc, force_treat_as_permanent=not exc.retryable)
            await self._call_event_handler("on_connection_error", str(exc))
            return
        self._texts.clear()
        await self._call_event_handler("on_connected")

    async def _disconnect_websocket(self):
        await self.stop_all_metrics()
        ws, self._websocket = self._websocket, None
        self._texts.clear()
        if ws:
            await ws.close()
            await self._call_event_handler("on_disconnected")

    async def _send_keepalive(self):
        if self._texts:
            await self._websocket.send(p.encode(p.Keepalive()))

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        if not self._reconnect_in_progress and (not self._websocket or self._websocket.state is not State.OPEN):
            await self._connect()
        first = context_id not in self._texts
        s = self._settings
        msg = p.Text(context_id, text, **(speech_options(voice=s.voice, language=s.language, instruct=s.instruct,
                                                         **self._options) if first else {}))
        try:
            if not self._websocket:
                raise ConnectionError("not connected to the gateway")
            await self._websocket.send(p.encode(msg))
        except (ConnectionError, ConnectionClosed) as exc:
            yield ErrorFrame(f"{self}: cannot send text to the gateway: {exc}")
            yield TTSStoppedFrame(context_id=context_id)
            await self.remove_audio_context(context_id)
            return
        self._texts.setdefault(context_id, WordPieces()).text += text
        await self.start_tts_usage_metrics(text)
        yield None

    async def flush_audio(self, context_id: str | None = None):
        """The end of the turn: `end`, answered by `done` after the context's last audio."""
        await self._send_if_started(p.End(context_id or self.get_active_audio_context_id()))

    async def on_audio_context_interrupted(self, context_id: str):
        await self.stop_all_metrics()
        await self._send_if_started(p.Cancel(context_id))
        await super().on_audio_context_interrupted(context_id)

    async def _send_if_started(self, msg: p.End | p.Cancel) -> None:
        if msg.context_id in self._texts and self._websocket:
            try:
                await self._websocket.send(p.encode(msg))
            except ConnectionClosed:            # the context ended with the socket; the receive loop reconnects
                pass

    async def _update_settings(self, delta: QwenTTSSettings):
        changed = await super()._update_settings(delta)
        if changed.keys() & CONTEXT_SETTINGS and self._turn_context_id:
            await self._push_sequencer_frames(
                await self._aggregated_frame_sequencer.finalize(self._turn_context_id), self._turn_context_id)
            await self.flush_audio(self._turn_context_id)
            self._turn_context_id = None
            self._turn_context_id = self.create_context_id()
        return changed

    async def _receive_messages(self):
        async for msg in server_messages(self._websocket):
            await self._on_message(msg)

    async def _on_message(self, msg: p.ServerMessage) -> None:
        ctx, last = getattr(msg, "context_id", None), p.ends_context(msg)
        if last:
            self._texts.pop(ctx, None)
        if isinstance(msg, p.Error):
            await self.push_error(f"{self}: gateway error {msg.code}: {msg.message}")
        if ctx is None or not self.audio_context_available(ctx):
            return                                          # an interrupted context, or a message about none
        if isinstance(msg, p.Audio):
            frame = TTSAudioRawFrame(msg.data, self._rate, 1, context_id=ctx)
            await self.append_to_audio_context(ctx, frame)
        elif isinstance(msg, p.Words) and ctx in self._texts:
            text = self._texts[ctx]                          # words with their punctuation, as the LLM wrote them
            await self.add_word_timestamps([(piece.strip(), start) for piece, start, _ in text.pieces(msg)], ctx,
                                           includes_inter_frame_spaces=not text.spaced or None)
        elif last:
            await self.append_to_audio_context(ctx, TTSStoppedFrame(context_id=ctx))
            await self.remove_audio_context(ctx)
