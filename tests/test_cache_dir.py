"""--cache-dir: set before anything compiles, private to its user, and a second process's compile reads it."""
import json
import os
import stat
import subprocess
import sys

import pytest

from gateway import cache_dir
from gateway.cli import build_parser
from gateway.fatal import StartupError
from bench.load_server import ROOT, free_port

COMPILE_TWICE = """
import json, sys
from gateway import cache_dir
cache_dir.use(sys.argv[1])
import torch
from torch._dynamo.utils import counters
from engine.kernels.layer_math import rms_norm
norm = torch.compile(rms_norm, dynamic=True)          # as engine/kernels/registry.py compiles the layer math
norm(torch.randn(5, 64), torch.ones(64), 1e-6)
print(json.dumps(dict(counters["inductor"])))
"""


@pytest.fixture
def env(monkeypatch):
    for variable in cache_dir.VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return os.environ


def test_the_flag_points_torchs_and_tritons_caches_into_a_private_folder(env, tmp_path):
    args = build_parser()[0].parse_args(["serve", "--dummy", "tiny", "--cache-dir", str(tmp_path / "c" / "compile")])
    root = cache_dir.use(args.cache_dir)
    assert root == tmp_path / "c" / "compile" and stat.S_IMODE(root.stat().st_mode) == 0o700
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor") and env["TRITON_CACHE_DIR"] == str(root / "triton")
    default = build_parser()[0].parse_args(["synth", "--dummy", "tiny", "--text", "x", "--out", "x.wav"]).cache_dir
    assert default == os.environ.get("QWEN_TTS_GATEWAY_CACHE", "~/.cache/qwen-tts-gateway/compile")


def test_no_folder_leaves_torchs_defaults(env):
    assert cache_dir.use("") is None and not any(v in env for v in cache_dir.VARIABLES)


def test_a_folder_every_user_may_write_is_refused_in_one_line(env, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(StartupError, match="writable by every user.*chmod o-w"):
        cache_dir.use(str(shared))
    (tmp_path / "file").write_text("")
    with pytest.raises(StartupError, match="choose a writable folder"):
        cache_dir.use(str(tmp_path / "file" / "compile"))


def test_serve_sets_the_caches_before_it_starts_the_engine_core(env, tmp_path, monkeypatch):
    from gateway.commands import serve
    from gateway.engine_process import starts

    def spawn(spec, log_level):
        seen.update({v: os.environ.get(v) for v in cache_dir.VARIABLES})
        raise SystemExit("stop before the engine core")
    seen = {}
    monkeypatch.setattr(starts, "spawn", spawn)
    argv = ["serve", "--dummy", "tiny", "--device", "cpu", "--port", str(free_port()), "--cache-dir", str(tmp_path)]
    with pytest.raises(SystemExit, match="stop before"):
        serve.run(build_parser()[0].parse_args(argv), argv[1:])
    assert seen == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}


@pytest.mark.slow                 # inductor compiles C++ on the CPU: tens of seconds
def test_a_second_process_reuses_the_compiled_layer_math(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))
    runs = [json.loads(subprocess.run([sys.executable, "-c", COMPILE_TWICE, str(tmp_path)], cwd=ROOT, env=env,
                                      capture_output=True, text=True, timeout=600, check=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert runs[0].get("fxgraph_cache_miss", 0) >= 1 and not runs[0].get("fxgraph_cache_hit")
    assert runs[1].get("fxgraph_cache_hit", 0) >= 1 and not runs[1].get("fxgraph_cache_miss")
    assert any((tmp_path / "inductor").iterdir())
