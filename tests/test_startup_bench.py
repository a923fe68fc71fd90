"""bench/startup_bench.py on the CPU: two real `serve` starts, cold and warm, to /health, with their logged phases."""
import importlib.util
import json
from pathlib import Path

import pytest

from bench import startup_bench


@pytest.mark.slow                            # two `serve` processes
def test_cold_then_warm_serve_reach_health_and_report_their_phases(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "stale").write_text("")                      # the cold start begins with an empty cache
    result = startup_bench.main(["--serve", "--dummy tiny --device cpu --workers 1", "--out", str(tmp_path / "out"),
                                 "--cache-dir", str(cache), "--timeout", "240"])
    assert json.loads((tmp_path / "out" / "startup_bench.json").read_text()) == result
    assert result["device"] == "cpu" and 0 < result["startup_cold_s"] and 0 < result["startup_warm_s"]
    for name in ("cold", "warm"):
        run = result["runs"][name]
        logged = {p["phase"]: p["seconds"] for p in run["phases"]}
        assert {"weights", "tokenizer", "KV allocation", "warm-up", "engine core", "engine core ready"} <= set(logged)
        assert logged["engine core"] <= logged["engine core ready"] <= run["health_s"]
        assert (tmp_path / "out" / f"serve-{name}.log").exists()
    assert not (cache / "stale").exists() and cache.stat().st_mode & 0o777 == 0o700      # made again by serve


@pytest.mark.slow
def test_a_start_that_fails_is_recorded_with_its_error_and_the_phases_it_reached(tmp_path):
    run = startup_bench.start(f"--model {tmp_path / 'nowhere'} --device cpu --workers 1", tmp_path / "serve.log", 120)
    assert run["health_s"] is None and "serve exited" in run["error"] and run["phases"] == []


def test_a_package_without_bytecode_is_compiled_into_a_prefix_the_starts_inherit_and_nothing_is_left(tmp_path,
                                                                                                 monkeypatch):
    """As pip would have at install: the lent GPU machines' torch has no .pyc and Python may not write one."""
    import os
    import sys
    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    with startup_bench.installed_bytecode("pkg") as how:
        prefix = os.environ["PYTHONPYCACHEPREFIX"]
        assert how.startswith("compiled by the bench") and sys.pycache_prefix == prefix
        assert list(Path(prefix).rglob("__init__*.pyc")) and not (package / "__pycache__").exists()
    assert "PYTHONPYCACHEPREFIX" not in os.environ and sys.pycache_prefix is None and not Path(prefix).exists()
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / Path(importlib.util.cache_from_source(str(package / "__init__.py"))).name).write_bytes(b"")
    with startup_bench.installed_bytecode("pkg") as how:
        assert how == "installed" and "PYTHONPYCACHEPREFIX" not in os.environ
    with pytest.raises(SystemExit, match="not installed"):
        with startup_bench.installed_bytecode("no_such_package_here"):
            pass
