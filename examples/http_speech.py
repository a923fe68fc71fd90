"""The OpenAI-compatible HTTP API: list the voices, then speak a text into a WAV file, streamed as it is generated.

    qwen-tts-gateway serve --dummy tiny --device cpu &
    python examples/http_speech.py --text "Hello from the gateway." --out speech.wav
"""
import argparse
import time

import httpx


def main(args) -> None:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=120) as client:
        voices = [v["name"] for v in client.get("/v1/voices").raise_for_status().json()["voices"]]
        print("voices:", ", ".join(voices))
        body = {"model": "qwen3-tts", "input": args.text, "voice": args.voice or next(iter(voices), None),
                "language": args.language, "response_format": "wav", "stream": True}
        t0, first = time.monotonic(), None
        with client.stream("POST", "/v1/audio/speech", json=body) as response:
            if response.status_code != 200:
                raise SystemExit(f"{response.status_code}: {response.read().decode()}")
            with open(args.out, "wb") as out:
                for chunk in response.iter_bytes():
                    first = first or time.monotonic() - t0
                    out.write(chunk)
        print(f"first bytes after {first * 1000:.0f} ms, all after {(time.monotonic() - t0) * 1000:.0f} ms: {args.out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key")
    parser.add_argument("--text", default="Hello from the gateway.")
    parser.add_argument("--voice", help="default: the first voice the server lists")
    parser.add_argument("--language", default="auto")
    parser.add_argument("--out", default="speech.wav")
    main(parser.parse_args())
