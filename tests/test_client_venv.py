"""The client distribution alone, as an agent worker installs it: a fresh venv gets `integrations[livekit,pipecat]`
(pip resolves the frameworks; torch must not come), and the LiveKit and Pipecat tests run there, against gateways
that this process serves (tests/gateway_harness.py)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gateway_harness

pytestmark = pytest.mark.slow                # a fresh venv, pip installs

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK_TESTS = ["tests/test_integrations_livekit.py", "tests/test_integrations_pipecat.py"]


@pytest.fixture(scope="module")
def client_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("client-venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    no_torch = venv / "no-torch.txt"
    no_torch.write_text("torch<0\n")                    # a dependency on torch fails the install, not downloads GBs
    pip = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "-c", no_torch, f"{ROOT / 'integrations'}[livekit,pipecat]", "pytest>=8",
                          "pytest-timeout"], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    yield venv / "bin" / "python"
    shutil.rmtree(venv)                                 # 0.75 GB: the frameworks' dependencies


def test_the_client_installs_without_torch(client_python):
    probe = subprocess.run([client_python, "-c", "import qwen_tts_client.livekit, qwen_tts_client.pipecat; import torch"],
                           capture_output=True, text=True, timeout=120)
    assert "No module named 'torch'" in probe.stderr, probe.stderr[-3000:]


def test_the_livekit_and_pipecat_tests_pass_with_the_client_alone(client_python):
    harness = gateway_harness.listen()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["QWEN_TTS_TEST_HARNESS"] = f"http://127.0.0.1:{harness.server_port}"
    try:                                                # no conftest: it imports torch and puts the checkout on the path
        run = subprocess.run([client_python.parent / "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
                              "-W", "ignore::DeprecationWarning", *FRAMEWORK_TESTS], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    finally:
        harness.shutdown()
        harness.server_close()
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 0 and "passed" in summary and "skipped" not in summary, run.stdout[-6000:] + run.stderr
