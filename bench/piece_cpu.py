"""The front end's own CPU per text piece, in process: a session's handling of 1-character pieces into one context
(parse, the context's bookkeeping, the engine client's batch, pickled every 10 pieces), without sockets or core.
    python3 bench/piece_cpu.py [--pieces 20000] [--profile]
Prints µs of CPU a piece, best of three; --profile: cProfile's top functions over one more pass."""
import argparse
import asyncio
import cProfile
import itertools
import pstats
import time

from engine import Engine
from engine.api.validate import Validator
from gateway.app_state import Gateway, GatewayConfig
from gateway.engine_process import EngineClient, wire
from gateway.limits import Limits
from gateway.session import Session
from qwen_tts_client import protocol as p


class QuietSocket:
    async def send_text(self, text): pass

    async def send_bytes(self, data): pass

    async def close(self, *args): pass


def engine_client() -> EngineClient:
    """The front end's engine client, described by the tiny engine as the core would, its batches only pickled."""
    engine = Engine.load(dummy="tiny", device="cpu", max_active=4)
    described = engine.description()
    client = EngineClient(None, "ipc://unused")
    client.info, client.ids = described["info"], itertools.count(1)
    client.validator = Validator(described["rules"], engine.voices, described["max_text_chars"], described["check"])
    client._flush = lambda: wire.dumps(client.batch.take(0.0))
    return client


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pieces", type=int, default=20000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    client = engine_client()
    config = GatewayConfig(limits=Limits(max_pending_chars=10 ** 8, max_pending_chars_per_socket=10 ** 8),
                           max_utterance_chars=10 ** 8)
    gateway = Gateway(config, client)
    gateway.status, gateway.voices = "ready", lambda: []
    session = Session(gateway, QuietSocket(), p.StreamFormat.from_query({}))
    frame = {"type": "websocket.receive", "text": p.encode(p.Text("c1", "a"))}

    def feed(n: int) -> None:
        for i in range(n):
            session._on_frame(frame)
            if i % 10 == 9:
                client._flush()

    feed(2000)
    assert list(session.contexts) == ["c1"] and not gateway.metrics.errors
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        feed(args.pieces)
        best = min(best, (time.process_time() - start) / args.pieces * 1e6)
    print(f"{best:.2f} µs of CPU a piece")
    if args.profile:
        with cProfile.Profile() as profile:
            feed(args.pieces)
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    asyncio.run(main())
