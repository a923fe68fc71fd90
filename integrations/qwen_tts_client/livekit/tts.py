"""QwenTTS: a LiveKit Agents streaming TTS speaking through the gateway, all streams sharing one socket."""
from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr, tts, utils

from .. import protocol as p
from ..client import GatewayClient
from ..connection import Endpoint, gateway_language, speech_options
from .stream import QwenSynthesizeStream

SESSION_FILTERS = {"filter_markdown": False, "filter_emoji": False}     # LiveKit's defaults filter these before us


class QwenTTS(tts.TTS):
    def __init__(self, *, base_url: str = "ws://127.0.0.1:8000", api_key: str | None = None, voice: str | None = None,
                 language: str = "auto", instruct: str | None = None,
                 sample_rate: int = p.DEFAULT_SAMPLE_RATE,
                 model: str = "qwen3-tts", retries: int = 2, keepalive: float = 10.0, **options):
        """`voice`: a speaker or registered clone (None: the model's first); `language`: a name, ISO code or 'auto';
        `instruct`: style (1.7B CustomVoice) or voice description (VoiceDesign); `sample_rate`: 24000, 16000 or 8000;
        `options`: other speech settings (temperature, ..., word_timestamps); `retries`, `keepalive`: the socket's.
        The gateway's markdown and emoji filters are off by default: AgentSession's tts_text_transforms run them."""
        options = {**SESSION_FILTERS, **options}
        super().__init__(capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
                         sample_rate=sample_rate, num_channels=1)
        self._model = model
        self._options = speech_options(voice=voice, language=gateway_language(language), instruct=instruct, **options)
        self._client = GatewayClient(Endpoint(base_url, api_key, sample_rate), retries=retries, keepalive=keepalive)

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "qwen-tts-gateway"

    def update_options(self, *, voice: NotGivenOr[str] = NOT_GIVEN, language: NotGivenOr[str] = NOT_GIVEN,
                       instruct: NotGivenOr[str | None] = NOT_GIVEN) -> None:
        """New settings for the streams started from now on."""
        changes = {"voice": voice, "language": language, "instruct": instruct}
        given = {k: v for k, v in changes.items() if utils.is_given(v)}
        if "language" in given:
            given["language"] = gateway_language(given["language"])
        self._options = speech_options(**{**self._options, **given})

    def prewarm(self) -> None:
        self._client.spawn(self._client.connect())

    def synthesize(self, text: str, *,
                   conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> tts.ChunkedStream:
        return self._synthesize_with_stream(text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> QwenSynthesizeStream:
        return QwenSynthesizeStream(tts=self, conn_options=conn_options)

    async def aclose(self) -> None:
        await self._client.aclose()
