"""A real gateway server on loopback in a background thread: for tests of the gateway and its integrations."""
import functools
import socket
import threading
import time

import httpx

from engine.core.clock import REAL_CLOCK, Clock
from gateway.engine_process import EngineClient, starts
from gateway.server import GatewayServer, create_app, uvicorn_config
from gateway.app_state import Gateway, GatewayConfig


class ServerThread:
    def __init__(self, engine=None, config: GatewayConfig | None = None, log_level: str = "warning", aligner=None,
                 client: EngineClient | None = None, clock: Clock = REAL_CLOCK):
        """`engine` (and `aligner`) served by an engine-core thread of this process, over the core's socket; or
        `client`, an engine core of its own (core.starts.spawn). `clock`: the gateway's (tests/fake_clock.py)."""
        self.engine, self.aligner = engine, aligner
        self.gateway = Gateway(config or GatewayConfig(), client or starts.in_thread(engine, aligner), clock)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # a restart on the port: its closed sockets wait
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        app = create_app(self.gateway)
        self.server = GatewayServer(self.gateway, uvicorn_config(app, "127.0.0.1", self.port, self.gateway, log_level))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @functools.cached_property
    def http(self) -> httpx.Client:
        """One keep-alive client for the tests' requests: each new httpx client loads the CA bundle (30 ms)."""
        return httpx.Client(base_url=self.url, timeout=60)

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/tts/websocket"

    def start(self, timeout: float = 120.0) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.gateway.status not in ("ready", "failed"):
            time.sleep(0.05)
        if self.http.get("/health").status_code != 200:
            raise RuntimeError(f"gateway did not become ready: {self.gateway.status}")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        self.http.close()
