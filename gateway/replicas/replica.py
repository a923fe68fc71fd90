"""One replica of `serve --replicas`: a Ray Serve deployment running a whole `serve` unit on a port of its own."""
import asyncio
import ctypes
import signal
import socket
import subprocess
import sys
import urllib.request

import ray
from ray import serve

PR_SET_PDEATHSIG = 1


def _die_with_the_replica() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)      # a unit never outlives its replica's actor


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class GatewayReplica:
    async def __init__(self, unit_args: list[str], grace_s: float = 10.0):
        """`unit_args`: serve's arguments for the unit (no --host/--port); ready once its /health answers 200."""
        host = ray.util.get_node_ip_address()
        port = free_port(host)
        self.name = str(serve.get_replica_context().rank.rank)
        self.url, self.grace_s = f"http://{host}:{port}", grace_s
        command = [sys.executable, "-m", "gateway.cli", "serve", *unit_args, "--host", host, "--port", str(port)]
        self.unit = subprocess.Popen(command, preexec_fn=_die_with_the_replica)
        while not await asyncio.to_thread(self._healthy):
            self.check_health()
            await asyncio.sleep(0.5)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def describe(self) -> dict:
        return dict(name=self.name, url=self.url, pid=self.unit.pid)

    def check_health(self) -> None:
        """Ray Serve's health check: a replica whose unit has exited is replaced."""
        if self.unit.poll() is not None:
            raise RuntimeError(f"replica {self.name}: its serve unit exited with status {self.unit.returncode}")

    def __del__(self) -> None:
        """Ray Serve's graceful stop: the unit drains (SIGINT), as `serve` does."""
        if getattr(self, "unit", None) is not None and self.unit.poll() is None:
            self.unit.send_signal(signal.SIGINT)
            try:
                self.unit.wait(self.grace_s + 5)
            except subprocess.TimeoutExpired:
                self.unit.kill()
