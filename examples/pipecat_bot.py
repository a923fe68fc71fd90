"""A Pipecat voice bot that speaks with Qwen3-TTS through the gateway.

    pip install "./integrations[pipecat]" "pipecat-ai[local,deepgram,openai,silero]"   # the bot's side, no torch
    qwen-tts-gateway serve --model Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice &   # the gateway (pip install -e .), or
                                                                            # --dummy tiny --device cpu
    DEEPGRAM_API_KEY=... OPENAI_API_KEY=... python examples/pipecat_bot.py      # talk to it (microphone, speaker)
    python examples/pipecat_bot.py say "Hello there, how are you?" bot.wav       # the TTS part alone

STT and LLM are Deepgram and OpenAI here (any Pipecat STT/LLM service works the same). QWEN_TTS_URL (default
ws://127.0.0.1:8000), QWEN_TTS_API_KEY and QWEN_TTS_VOICE point at the gateway.
"""
import asyncio
import os
import re
import sys
import wave

from pipecat.frames.frames import (EndFrame, LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMRunFrame,
                                   LLMTextFrame, TTSAudioRawFrame)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker, ProcessorUnusablePolicy
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.workers.runner import WorkerRunner

from qwen_tts_client.pipecat import QwenTTSService


def make_tts() -> QwenTTSService:
    return QwenTTSService(base_url=os.environ.get("QWEN_TTS_URL", "ws://127.0.0.1:8000"),
                          api_key=os.environ.get("QWEN_TTS_API_KEY"), voice=os.environ.get("QWEN_TTS_VOICE"),
                          language="english")


async def run(worker: PipelineWorker) -> None:
    runner = WorkerRunner()
    await runner.add_workers(worker)
    await runner.run()


async def bot() -> None:
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (LLMContextAggregatorPair,
                                                                       LLMUserAggregatorParams)
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.transports.local.audio import LocalAudioTransport, LocalAudioTransportParams

    transport = LocalAudioTransport(LocalAudioTransportParams(audio_in_enabled=True, audio_out_enabled=True))
    llm = OpenAILLMService(api_key=os.environ["OPENAI_API_KEY"], settings=OpenAILLMService.Settings(
        system_instruction="You are a friendly voice assistant. Answer briefly, in plain spoken sentences."))
    context = LLMContext()
    user, assistant = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
        vad_analyzer=SileroVADAnalyzer()))
    pipeline = Pipeline([transport.input(), DeepgramSTTService(api_key=os.environ["DEEPGRAM_API_KEY"]), user, llm,
                         make_tts(), transport.output(), assistant])
    worker = PipelineWorker(pipeline, processor_unusable_policy=ProcessorUnusablePolicy.END)
    context.add_message({"role": "developer", "content": "Greet the user and offer your help."})
    await worker.queue_frames([LLMRunFrame()])
    await run(worker)


class AudioCollector(FrameProcessor):
    def __init__(self):
        super().__init__()
        self.audio, self.sample_rate = bytearray(), 24000

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio += frame.audio
            self.sample_rate = frame.sample_rate
        await self.push_frame(frame, direction)


async def say(text: str, path: str) -> None:
    """One LLM turn, streamed word by word, through the TTS service into a WAV file."""
    collector = AudioCollector()
    worker = PipelineWorker(Pipeline([make_tts(), collector]), processor_unusable_policy=ProcessorUnusablePolicy.END)
    words = [LLMTextFrame(piece) for piece in re.findall(r"\S+\s*", text)]
    await worker.queue_frames([LLMFullResponseStartFrame(), *words, LLMFullResponseEndFrame(), EndFrame()])
    await run(worker)
    with wave.open(path, "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(collector.sample_rate)
        out.writeframes(bytes(collector.audio))
    print(f"wrote {path}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["say"]:
        asyncio.run(say(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "bot.wav"))
    else:
        asyncio.run(bot())
