"""A front-end process imports no torch: not to serve, not to read the engine core's description, not to check a
request or list voices. Each check runs in a fresh interpreter where importing torch raises."""
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from engine import Engine
from gateway.engine_process import starts
from gateway.engine_process.io_loop import CoreIOLoop

ROOT = Path(__file__).resolve().parent.parent
FRONT_END = ("gateway.server", "gateway.app_state", "gateway.session", "gateway.http_api", "gateway.openai_speech",
             "gateway.dialects", "gateway.engine_process.client", "gateway.frontends", "gateway.words", "aligner.live",
             "aligner.stream", "aligner.bargein", "aligner.text")
NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "safetensors"):
            raise ImportError(f"a front end imported {name}")
sys.meta_path.insert(0, NoTorch())
"""


def run_without_torch(body: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))
    done = subprocess.run([sys.executable, "-c", NO_TORCH + textwrap.dedent(body)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_front_end_modules_import_without_torch():
    out = run_without_torch(f"""
        import importlib, time
        t = time.perf_counter()
        for name in {FRONT_END!r}:
            importlib.import_module(name)
        took = time.perf_counter() - t
        loaded = sorted(m for m in sys.modules if m.startswith(("engine.core.", "engine.models.", "engine.kernels")))
        assert "torch" not in sys.modules and "numpy" in sys.modules, sorted(sys.modules)
        assert loaded == ["engine.core.clock", "engine.core.listener_clock", "engine.core.startup",
                          "engine.models.qwen3_tts",
                          "engine.models.qwen3_tts.voice_files"], loaded
        rss = [line for line in open("/proc/self/status") if line.startswith("VmRSS")][0].split()[1]
        print(f"import {{took:.2f}} s, RSS {{int(rss) / 1024:.0f}} MB")
    """)
    print(out)


@pytest.mark.slow                                   # processes
def test_a_front_end_process_serves_from_the_engine_core_without_torch(tmp_path):
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2, voices_dir=str(tmp_path)).start()
    where = starts.address()
    io_loop = CoreIOLoop(engine, None, where)
    thread = threading.Thread(target=io_loop.serve, daemon=True)
    thread.start()
    try:
        out = run_without_torch(f"""
            import asyncio
            from pathlib import Path
            from engine.api.request import EngineInputError, SynthesisRequest
            from gateway.engine_process import starts

            async def main():
                client = starts.connect({where!r})
                await client.start()
                assert client.info["sample_rate"] == 24000 and client.info["model_type"] == "custom_voice"
                chunks = [c async for c in client.submit(SynthesisRequest(text="Hello there.", max_frames=4))]
                assert chunks[-1].final and sum(len(c.pcm) for c in chunks) > 0
                try:
                    client.submit(SynthesisRequest(text="Hi", language="klingon"))
                    raise AssertionError("an unknown language passed the front end's check")
                except EngineInputError as exc:
                    assert exc.code == "unknown_language", exc
                Path(client.voices.store.path, "anna.safetensors").write_bytes(b"")
                assert "anna" in client.voices and "bob" not in client.voices
                await client.close()
                print("served", len(chunks), "chunks")
                assert "torch" not in sys.modules

            asyncio.run(main())
        """)
    finally:
        io_loop.running = False
        thread.join(30)
    assert out.startswith("served")


def test_the_front_end_counts_audio_at_the_engine_s_rate():
    from gateway.metrics import Metrics
    from gateway.engine_stream import EngineStream

    class Engine16k:
        info = dict(sample_rate=16000, samples_per_frame=1280)

        def submit(self, request):
            return None

    metrics = Metrics()
    stream = EngineStream(Engine16k(), metrics, None, "http")
    stream.samples = metrics.audio_samples = 32000
    assert stream.frames == 25
    text = metrics.render({}, Engine16k.info)
    assert "tts_audio_seconds_total 2.000" in text and "tts_frames_total 25" in text


def test_serve_s_command_line_parses_without_torch():
    run_without_torch("""
        from gateway.cli import build_parser
        args = build_parser()[0].parse_args(["serve", "--dummy", "tiny-1.7B-Base", "--device", "cpu"])
        assert args.dummy == "tiny-1.7B-Base" and "torch" not in sys.modules
    """)
