"""On a CPU the KV cache is sized by the RAM available, as on a GPU by its memory: the largest published variant
synthesizes within a 24 GB machine's memory, and a small RAM gets a small cache, not an OOM kill."""
import os
import subprocess
import sys

import pytest

from bench.load_server import ROOT
from engine import Engine
from engine.core.memory import CPU_TOKENS_PER_STREAM, GIB, MARGIN

WEIGHTS_1_7B = 7.7 * GIB          # fp32 (README, Memory)
KV_TOKEN_FP32 = 224 << 10          # 28 layers x 8 KV heads x 128 x K and V x 4 bytes


def sized(monkeypatch, ram: int, max_active: int) -> int:
    monkeypatch.setattr("engine.core.memory.available_ram", lambda: ram)
    engine = Engine.load(dummy="tiny", device="cpu", max_active=max_active)
    return (engine.runner.kv.num_blocks - 1) * engine.runner.block_size


@pytest.mark.slow                                   # caches of 500k tokens
def test_the_cache_takes_the_share_of_ram_left_at_most_2048_tokens_a_stream(monkeypatch):
    assert sized(monkeypatch, 64 * GIB, 8) == 8 * CPU_TOKENS_PER_STREAM                   # plenty: the cap
    token = 2 * 2 * 2 * 16 * 4                                                          # tiny: 512 bytes a token
    ram = MARGIN + 600 * 1024 * token                                                   # room for ~500k tokens
    tokens = sized(monkeypatch, ram, 1024)
    assert tokens == int(0.9 * ram - MARGIN) // (16 * token) * 16 < 1024 * CPU_TOKENS_PER_STREAM


@pytest.mark.slow
def test_the_largest_published_variant_synthesizes_within_a_24_gb_machine(tmp_path):
    """About 3.5 minutes on 2 cores, most of it drawing 2 billion random weights."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "synth", "--dummy", "1.7B-CustomVoice", "--device",
                             "cpu", "--max-frames", "2", "--text", "Hello.", "--out", str(tmp_path / "x.wav"),
                             "--log-level", "info"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        log = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        proc.kill()
    assert os.waitstatus_to_exitcode(status) == 0, log
    assert "9216 tokens, 224 KiB a token" in log and "2 frames" in log
    peak = usage.ru_maxrss * 1024
    assert peak < WEIGHTS_1_7B + 9216 * KV_TOKEN_FP32 + 1.5 * GIB < 24e9, peak / GIB     # measured: 10.2 GiB
