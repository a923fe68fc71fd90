"""The integration tests' gateways, served by this process (tiny dummy engine; the tiny random aligner: every word is
timed, the times are meaningless) and driven by command: from this process, or over HTTP on loopback (`listen`) from
tests that run in a Python without torch (tests/test_client_venv.py)."""
import json
import socket
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aligner import Aligner
from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from integration_helpers import KEY

SERVERS: dict[int, ServerThread] = {}             # by port


def loaded(words: bool = True, **config) -> ServerThread:
    """`words`: with the aligner."""
    return ServerThread(Engine.load(dummy="tiny", device="cpu", max_active=4).start(),
                        GatewayConfig(api_keys=(KEY,), **config),
                        aligner=Aligner.load(dummy="tiny", device="cpu") if words else None)


def serve(**config) -> int:
    srv = loaded(**config).start()
    SERVERS[srv.port] = srv
    return srv.port


def restart(port: int, **config) -> int:
    """Stops the gateway on `port` (if it still runs) and serves there again, loaded first so that the gap is short."""
    srv = loaded(**config)
    stop(port)
    srv.sock.close()                            # ServerThread binds a free port
    srv.sock, srv.port = socket.create_server(("127.0.0.1", port)), port
    srv.thread = threading.Thread(target=srv.server.run, kwargs={"sockets": [srv.sock]}, daemon=True)
    SERVERS[port] = srv.start()
    return port


def stop(port: int) -> None:
    if srv := SERVERS.pop(port, None):
        srv.stop()


def state(port: int) -> dict:
    """What the gateway holds now: its sockets' session ids, open contexts, streams generating, audio, errors sent."""
    srv = SERVERS[port]
    gw = srv.gateway
    return {"sessions": [s.id for s in list(gw.sessions)], "open_contexts": gw.open_contexts,
            "generating": srv.engine.num_active, "audio_samples": gw.metrics.audio_samples,
            "errors": dict(gw.metrics.errors)}


COMMANDS = {f.__name__: f for f in (serve, restart, stop, state)}


class CommandHandler(BaseHTTPRequestHandler):
    """POST a JSON [command, args, kwargs]: 200 and the JSON result, or 500 and the traceback."""

    def do_POST(self):
        name, args, kwargs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        try:
            status, body = 200, json.dumps(COMMANDS[name](*args, **kwargs))
        except Exception:
            status, body = 500, traceback.format_exc()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):               # quiet: pytest shows what failed
        pass


def listen() -> ThreadingHTTPServer:
    """Commands over HTTP on loopback (its `server_port`), until its shutdown()."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), CommandHandler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http
