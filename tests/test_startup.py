"""A newcomer's start: a port already served is refused, every fatal start-up error is one line saying what to do
(the traceback only at --log-level debug), the server says where it listens once ready."""
import os
import subprocess
import sys
import time

import pytest

from bench.load_server import ROOT, ServeProcess

pytestmark = pytest.mark.slow                # `serve` processes

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "integrations"),
                                                                os.environ.get("PYTHONPATH")])))


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def assert_one_line(result: subprocess.CompletedProcess, *words: str) -> str:
    """No traceback; the last line is the error, naming `words`."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "error:" in last and all(w in last for w in words), last
    return last


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    server = ServeProcess("--dummy tiny --device cpu --workers 1", log)
    try:
        server.wait_ready(120)
        yield server, log
    finally:
        server.stop()


def test_a_second_serve_on_a_served_port_is_refused_and_the_first_says_where_it_listens(served):
    first, log = served
    t0 = time.monotonic()
    second = cli("serve", "--dummy", "tiny-0.6B-Base", "--device", "cpu", "--port", str(first.port))
    assert_one_line(second, f"port {first.port}", "already in use", "--port")
    assert time.monotonic() - t0 < 60 and "starting the engine core" not in second.stderr     # refused before
    deadline = time.monotonic() + 10                    # the announcement follows the first report (1 s)
    while f"listening on {first.url}" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert f"listening on {first.url} (1 front ends, model dummy:tiny, 32 streams)" in log.read_text()


def test_the_example_client_says_why_a_barge_in_has_no_spoken_text(served, tmp_path):
    server, _ = served
    result = subprocess.run([sys.executable, "examples/ws_client.py", "--url", f"ws://127.0.0.1:{server.port}",
                             "--barge-in-ms", "80", "--token-ms", "5", "--out", str(tmp_path / "cut.wav")],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "spoken text: unknown (no word timestamps: the server has no --aligner" in result.stdout, result.stdout


def test_serve_with_a_missing_model_says_so_in_one_line(tmp_path):
    result = cli("serve", "--model", str(tmp_path / "nowhere"), "--device", "cpu", "--port", "0")
    assert_one_line(result, "nowhere", "--dummy")
    assert result.stderr.count("nowhere") == 2            # the log's error line and the last one, nothing else


def test_debug_shows_the_engine_cores_traceback(tmp_path):
    result = cli("serve", "--model", str(tmp_path / "nowhere"), "--device", "cpu", "--port", "0", "--log-level",
                 "debug")
    assert "Traceback" in result.stderr and "ModelLoadError" in result.stderr


def test_an_offline_hub_id_says_how_to_download_it(tmp_path):
    env = dict(ENV, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "synth", "--model", "Qwen/No-Such-Model", "--text",
                             "Hi", "--out", str(tmp_path / "x.wav")], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert_one_line(result, "hf download Qwen/No-Such-Model", "--model DIR", "--dummy")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this torch has CUDA")
@pytest.mark.parametrize("command", ["synth", "serve"])
def test_cuda_without_a_cuda_torch_says_what_to_install(command, tmp_path):
    extra = ["--text", "Hi", "--out", str(tmp_path / "x.wav")] if command == "synth" else ["--port", "0"]
    assert_one_line(cli(command, "--dummy", "tiny", "--device", "cuda", *extra), "no CUDA build", "--device cpu")


def test_a_bad_flag_value_is_one_line_with_the_choices():
    result = cli("serve", "--dummy", "tiny", "--log-level", "verbose")
    assert result.stderr.count("\n") == 1 and "choose from 'debug', 'info'" in result.stderr
    result = cli("synth", "--dummy", "2B-Nothing", "--text", "Hi", "--out", "x.wav")
    assert result.stderr.count("\n") == 1 and "1.7B-VoiceDesign" in result.stderr and "tiny-0.6B-Base" in result.stderr


@pytest.mark.parametrize("ram_gib,words", [(0.5, "to load the model: 1.0 GiB needed"),    # tiny's weights + margin
                                            (1.1, "for the KV cache")])                  # its weights fit, no cache
def test_not_enough_memory_names_what_it_needs_and_what_to_change(monkeypatch, ram_gib, words):
    from engine import Engine, ModelLoadError
    from gateway.fatal import one_line
    monkeypatch.setattr("engine.core.memory.available_ram", lambda: int(ram_gib * (1 << 30)))
    with pytest.raises(ModelLoadError) as err:
        Engine.load(dummy="tiny", device="cpu", max_active=2)
    message = one_line(err.value)
    assert "not enough memory" in message and words in message and "GiB" in message and "\n" not in message
    assert "smaller variant" in message


def test_a_killed_engine_core_is_named_with_the_likely_cause():
    from gateway.fatal import exited
    assert "lack of memory" in exited(-9) and "--max-active" in exited(-9)
    assert exited(1) == "the engine process exited (code 1)"
