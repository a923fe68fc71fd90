"""What the integration tests share: a gateway on loopback (tiny dummy engine, and the tiny random aligner for word
timestamps) that can come back on its port."""
import asyncio
import socket
import threading
import time

from aligner import Aligner
from engine import Engine
from gateway.service import GatewayConfig
from gateway.testing import ServerThread

KEY = "integration-key"
FRAMES = 12                                     # every utterance's cap: 0.96 s of audio
PIECES = ["Hello the", "re, how are", " you today?"]


def server(words: bool = True, **config) -> ServerThread:
    """`words`: with the aligner (random weights: every word is timed, the times are meaningless)."""
    return ServerThread(Engine.load(dummy="tiny", device="cpu", max_seqs=4).start(),
                        GatewayConfig(api_keys=(KEY,), **config),
                        aligner=Aligner.load(dummy="tiny", device="cpu") if words else None)


def serve(**config) -> ServerThread:
    return server(**config).start()


def restart(old: ServerThread, **config) -> ServerThread:
    """Stops `old` (if it still runs) and serves on its port again, loaded first so that the gap is short."""
    srv = server(**config)
    old.stop()
    srv.sock.close()                            # ServerThread binds a free port
    srv.sock, srv.port = socket.create_server(("127.0.0.1", old.port)), old.port
    srv.thread = threading.Thread(target=srv.server.run, kwargs={"sockets": [srv.sock]}, daemon=True)
    return srv.start()


async def wait_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)
