"""Extra front-end processes on serve's port (SO_REUSEPORT): one interpreter cannot parse a thousand sockets."""
import dataclasses
import logging
import math
import multiprocessing
import os
import socket

from .engine_process import starts
from .fatal import StartupError


def refuse_taken(host: str, port: int) -> None:
    """SO_REUSEPORT would let this server share a port another one listens on: a bind without it finds that one."""
    try:
        _bound(host, port, reuse_port=False).close()
    except OSError as exc:
        raise StartupError(f"port {port} on {host} is already in use ({exc.strerror}): stop the server that holds "
                           f"it or pass another --port") from None


def listening_socket(host: str, port: int) -> socket.socket:
    return _bound(host, port, reuse_port=True)


def _bound(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # a closed server's TIME_WAIT is no owner
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def share(config, workers: int):
    return dataclasses.replace(config, max_sockets=math.ceil(config.max_sockets / workers), workers=workers)


def start_frontends(n: int, config, address: str, host: str, port: int, log_level: str) -> list:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run_frontend, args=(config, address, host, port, log_level), name=f"frontend-{i}")
             for i in range(1, n + 1)]
    for proc in procs:
        proc.start()
    return procs


def run_frontend(config, address: str, host: str, port: int, log_level: str) -> None:
    """Stopped by serve (SIGTERM), never by the terminal's Ctrl-C, so that it drains in order."""
    from .server import GatewayServer, create_app, uvicorn_config
    from .app_state import Gateway

    os.setsid()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s frontend: %(message)s")
    gateway = Gateway(config, starts.connect(address))
    server = GatewayServer(gateway, uvicorn_config(create_app(gateway), host, port, gateway, log_level))
    server.run(sockets=[listening_socket(host, port)])
