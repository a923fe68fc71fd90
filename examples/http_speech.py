"""The OpenAI-compatible HTTP API with the standard library alone: list the voices, then speak a text into a file as
it is generated. `--out x.wav` streams raw PCM and wraps it with `wave`, which writes the exact sizes; `.mp3`, `.opus`
and `.aac` are written as they stream; `.flac` comes whole, its header exact.

    qwen-tts-gateway serve --dummy tiny --device cpu &
    python examples/http_speech.py --text "Hello from the gateway." --out speech.wav
"""
import argparse
import json
import time
import urllib.error
import urllib.request
import wave
from pathlib import Path


def call(args, path: str, body: dict | None = None):
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = f"Bearer {args.api_key}"
    data = None if body is None else json.dumps(body).encode()
    try:
        return urllib.request.urlopen(urllib.request.Request(args.url + path, data, headers), timeout=120)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{exc.code}: {exc.read().decode()}") from None


def main(args) -> None:
    with call(args, "/v1/voices") as response:
        voices = [v["name"] for v in json.load(response)["voices"]]
    print("voices:", ", ".join(voices))
    suffix = Path(args.out).suffix.lstrip(".").lower()
    body = {"model": "qwen3-tts", "input": args.text, "voice": args.voice or next(iter(voices), None),
            "language": args.language, "response_format": "pcm" if suffix == "wav" else suffix}
    t0, first = time.monotonic(), None
    with call(args, "/v1/audio/speech", body) as response, open(args.out, "wb") as file:
        out = wave.open(file, "wb") if suffix == "wav" else None
        if out:
            out.setnchannels(1), out.setsampwidth(2), out.setframerate(24000)     # the gateway's PCM
        while chunk := response.read1(65536):                                     # as it arrives
            first = first or time.monotonic() - t0
            out.writeframes(chunk) if out else file.write(chunk)
        if out:
            out.close()                                                           # writes the sizes
    print(f"first bytes after {first * 1000:.0f} ms, all after {(time.monotonic() - t0) * 1000:.0f} ms: {args.out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--text", default="Hello from the gateway.")
    parser.add_argument("--voice", help="default: the first voice the server lists")
    parser.add_argument("--language", default="auto")
    parser.add_argument("--out", default="speech.wav", help=".wav, .mp3, .opus, .aac or .flac")
    main(parser.parse_args())
