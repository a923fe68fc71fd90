"""What the integration tests share: gateways on loopback (tests/gateway_harness.py) that can come back on their
port. They are served by this process, or, where QWEN_TTS_TEST_HARNESS names a harness's URL, by the process that
listens there: the LiveKit and Pipecat tests then run where only the client package is installed, no torch."""
import asyncio
import json
import os
import time
import urllib.error
import urllib.request

import pytest

KEY = "integration-key"
FRAMES = 12                                     # every utterance's cap: 0.96 s of audio
PIECES = ["Hello the", "re, how are", " you today?"]
HARNESS = os.environ.get("QWEN_TTS_TEST_HARNESS")


def command(name: str, *args, **kwargs):
    if not HARNESS:
        import gateway_harness                  # the engine and torch: only where this process serves
        return gateway_harness.COMMANDS[name](*args, **kwargs)
    request = urllib.request.Request(HARNESS, json.dumps([name, args, kwargs]).encode())
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"gateway harness: {name}: {exc.read().decode()}") from None


class ServedGateway:
    def __init__(self, port: int):
        self.port, self.url = port, f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        command("stop", self.port)

    def state(self) -> dict:
        """sessions (ids), open_contexts, generating (engine streams), audio_samples, errors (by code)."""
        return command("state", self.port)

    def idle(self) -> bool:
        """No open context and nothing generating."""
        state = self.state()
        return state["open_contexts"] == 0 and state["generating"] == 0


def serve(**config) -> ServedGateway:
    """`words` (default True): with the aligner; other keywords are GatewayConfig's."""
    return ServedGateway(command("serve", **config))


def restart(old: ServedGateway, **config) -> ServedGateway:
    """Stops `old` (if it still runs) and serves on its port again, loaded first so that the gap is short."""
    return ServedGateway(command("restart", old.port, **config))


@pytest.fixture(scope="module")
def server():
    """A gateway with words (the tiny engine and aligner), every utterance capped at FRAMES."""
    srv = serve(max_frames=FRAMES)
    yield srv
    srv.stop()


async def wait_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)
