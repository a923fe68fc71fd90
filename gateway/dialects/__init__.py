"""Cartesia's and ElevenLabs' APIs on our sessions, engine and aligner: agents built on them change their base URL."""
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from . import cartesia, elevenlabs, one_shot
from .bridge import serve_dialect


async def cartesia_websocket(ws: WebSocket) -> None:
    await serve_dialect(ws, cartesia.Cartesia(ws.app.state.gateway))


def elevenlabs_websocket(multi: bool):
    async def endpoint(ws: WebSocket) -> None:
        await serve_dialect(ws, elevenlabs.ElevenLabs(ws.app.state.gateway, ws, multi))
    return endpoint


TTS = "/v1/text-to-speech/{voice_id}"
routes = [
    WebSocketRoute("/tts/websocket", cartesia_websocket),
    WebSocketRoute(f"{TTS}/multi-stream-input", elevenlabs_websocket(multi=True)),
    WebSocketRoute(f"{TTS}/stream-input", elevenlabs_websocket(multi=False)),
    Route("/tts/bytes", one_shot.speech(one_shot.cartesia_request, one_shot.CARTESIA), methods=["POST"]),
    *(Route(path, one_shot.speech(one_shot.elevenlabs_request, one_shot.ELEVENLABS), methods=["POST"])
      for path in (TTS, f"{TTS}/stream")),
]
