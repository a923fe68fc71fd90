"""A LiveKit Agents voice agent that speaks with Qwen3-TTS through the gateway.

    pip install "./integrations[livekit]"        # the agent's side: the client, without torch
    qwen-tts-gateway serve --model Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice &   # the gateway (pip install -e .), or
                                                                            # --dummy tiny --device cpu
    python examples/livekit_agent.py dev         # the agent: LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET set
    python examples/livekit_agent.py say "Hello there, how are you?" agent.wav     # the TTS part alone

STT and LLM here come from LiveKit Inference (any STT/LLM plugin works the same). QWEN_TTS_URL (default
ws://127.0.0.1:8000), QWEN_TTS_API_KEY and QWEN_TTS_VOICE point at the gateway. QwenTTS opens its own WebSocket,
so it needs no `utils.http_context` outside a job; plugins that use LiveKit's HTTP session do.
"""
import asyncio
import os
import re
import sys

from livekit import rtc
from livekit.agents import Agent, AgentServer, AgentSession, JobContext, cli, inference
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT

from qwen_tts_client.livekit import QwenTTS


def make_tts() -> QwenTTS:
    return QwenTTS(base_url=os.environ.get("QWEN_TTS_URL", "ws://127.0.0.1:8000"),
                   api_key=os.environ.get("QWEN_TTS_API_KEY"), voice=os.environ.get("QWEN_TTS_VOICE"),
                   language="english")


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session = AgentSession(stt=inference.STT("deepgram/nova-3"), llm=inference.LLM("openai/gpt-4.1-mini"),
                           tts=make_tts(), use_tts_aligned_transcript=True)   # word timings, once the aligner runs
    agent = Agent(instructions="You are a friendly voice assistant. Answer briefly, in plain spoken sentences.")
    await session.start(agent=agent, room=ctx.room)
    session.generate_reply(instructions="Greet the user and offer your help.")


async def say(text: str, path: str) -> None:
    """Streams `text` word by word, as an LLM would, and writes the audio and the timed transcript."""
    tts = make_tts()
    try:
        stream = tts.stream()
        for piece in re.findall(r"\S+\s*", text):
            stream.push_text(piece)
        stream.end_input()
        frames = []
        async with stream:
            async for ev in stream:
                frames.append(ev.frame)
                for word in ev.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, []):
                    print(f"  {word.start_time:6.2f} - {word.end_time:6.2f} s  {word!r}")
        with open(path, "wb") as out:
            out.write(rtc.combine_audio_frames(frames).to_wav_bytes())
        print(f"wrote {path}")
    finally:
        await tts.aclose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["say"]:
        asyncio.run(say(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "agent.wav"))
    else:
        cli.run_app(server)
