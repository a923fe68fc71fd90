"""A raw client of the WebSocket protocol v1: streams text as an LLM would, plays and/or saves the audio, prints word
timings, and shows barge-in (the user interrupts: `cancel` with what was played).

    qwen-tts-gateway serve --dummy tiny --dummy-aligner tiny --device cpu &     # or a real model and --aligner
    python examples/ws_client.py --text "Hello there, how are you today?" --out hello.wav
    python examples/ws_client.py --barge-in-ms 500 --out cut.wav   # interrupt after 500 ms of playback
    python examples/ws_client.py --play                             # play it (sounddevice and PortAudio)
"""
import argparse
import asyncio
import re
import time
import wave

import websockets

from qwen_tts_client import protocol as p

CONTEXT = "turn-1"


def tokens(text: str) -> list[str]:
    """Pieces as an LLM streams them: words with their trailing spaces."""
    return re.findall(r"\S+\s*", text)


async def feed(ws, args) -> None:
    for i, piece in enumerate(tokens(args.text)):
        msg = p.Text(CONTEXT, piece, voice=args.voice, language=args.language) if i == 0 else p.Text(CONTEXT, piece)
        await ws.send(p.encode(msg))
        await asyncio.sleep(args.token_ms / 1000)
    await ws.send(p.encode(p.End(CONTEXT)))


async def main(args) -> None:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = f"{args.url.rstrip('/')}/v1/tts/websocket?sample_rate={args.rate}"
    speaker = None
    if args.play:
        import sounddevice
        speaker = sounddevice.RawOutputStream(samplerate=args.rate, channels=1, dtype="int16")
        speaker.start()
    async with websockets.connect(url, additional_headers=headers) as ws:
        ready = p.parse_server(await ws.recv())
        if isinstance(ready, p.Error):
            raise SystemExit(f"refused: {ready.code}: {ready.message}")
        print(f"session {ready.session_id}, voices: {', '.join(ready.voices)}")
        feeder = asyncio.create_task(feed(ws, args))
        audio, started, cancelling = bytearray(), None, False
        async for frame in ws:
            msg = p.parse_server(frame)
            if isinstance(msg, p.Audio):
                started = started or time.monotonic()
                audio += msg.data
                if speaker:
                    speaker.write(bytes(msg.data))
                # playback runs from the first chunk on, as fast as real time and no faster than the audio comes
                played_ms = min((time.monotonic() - started) * 1000, len(audio) / 2 / args.rate * 1000)
                if args.barge_in_ms and played_ms >= args.barge_in_ms and not cancelling:
                    cancelling = True
                    feeder.cancel()
                    await ws.send(p.encode(p.Cancel(CONTEXT, played_ms=round(played_ms, 1))))
                    print(f"barge-in after {played_ms:.0f} ms of playback: cancel")
            elif isinstance(msg, p.Words):
                for word, start, end in zip(msg.words, msg.start, msg.end):
                    print(f"  {start:6.2f} - {end:6.2f} s  {word}")
            elif isinstance(msg, p.Done):
                print(f"done: {msg.audio_ms:.0f} ms of audio")
                break
            elif isinstance(msg, p.Cancelled):
                spoken = repr(msg.spoken_text) if msg.spoken_text is not None else (
                    "unknown (no word timestamps: the server has no --aligner, or alignment was unavailable)")
                print(f"cancelled: {msg.played_ms:.0f} ms played, {msg.generated_ms:.0f} ms generated, "
                      f"spoken text: {spoken}")
                del audio[int(msg.played_ms * args.rate / 1000) * 2:]         # keep what the listener heard
                break
            elif isinstance(msg, p.Error):
                print(f"error {msg.code}: {msg.message} (retryable: {msg.retryable})")
                break
        feeder.cancel()
    if speaker:
        speaker.stop()
    if args.out:
        with wave.open(args.out, "wb") as out:
            out.setnchannels(1), out.setsampwidth(2), out.setframerate(args.rate)
            out.writeframes(bytes(audio))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="ws://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--text", default="Hello there! I am speaking while the text is still streaming in.")
    parser.add_argument("--voice")
    parser.add_argument("--language", default="auto")
    parser.add_argument("--rate", type=int, default=24000, choices=p.SAMPLE_RATES)
    parser.add_argument("--token-ms", type=float, default=30.0, help="delay between text pieces (LLM pace)")
    parser.add_argument("--barge-in-ms", type=float, default=0.0, help="interrupt after this much playback")
    parser.add_argument("--play", action="store_true")
    parser.add_argument("--out", help="WAV file to write")
    asyncio.run(main(parser.parse_args()))
