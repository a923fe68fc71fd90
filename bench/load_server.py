"""The server under load: the real `qwen-tts-gateway serve` started as a subprocess, or one already running."""
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def health(http_url: str) -> dict | None:
    """GET /health: the model's info once the server is ready, else None."""
    try:
        with urllib.request.urlopen(f"{http_url}/health", timeout=5) as response:
            return json.loads(response.read())
    except (OSError, ValueError):          # refused, 503 (not ready), or no JSON
        return None


def device_name() -> str:
    """This machine's GPU (the server's, when the bench starts it), for the summary line."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.strip().splitlines()
        if out:
            return out[0].removeprefix("NVIDIA ").split()[0]            # "H100", not "H100 80GB HBM3"
    return "cpu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """`python3 -m gateway.cli serve ARGS --port P` from this checkout, its output in `log_path`."""

    def __init__(self, args: str, log_path: Path, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        paths = [str(ROOT), str(ROOT / "integrations"), os.environ.get("PYTHONPATH")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
        self.log = open(log_path, "w")
        command = [sys.executable, "-m", "gateway.cli", "serve", *shlex.split(args), "--port", str(self.port)]
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with status {self.proc.returncode}; see {self.log.name}")
            if info := health(self.url):
                return info
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"serve was not ready within {timeout:g} s; see {self.log.name}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGINT (a graceful drain), then SIGKILL after `timeout` s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode
