"""The soak bench against the real `serve` on the tiny dummy engine for a few seconds, cancels and aborted sockets
mixed in: every context ends, nothing but the provoked endings, nothing left held once the load stops."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow                # `serve` processes

ROOT = Path(__file__).resolve().parent.parent


def test_a_short_soak_ends_clean(tmp_path):
    subprocess.run([sys.executable, "bench/soak.py", "--serve", "--dummy tiny --device cpu --max-frames 8",
                    "--concurrency", "6", "--duration", "6", "--cancel", "0.3", "--abort", "0.1", "--clients", "2",
                    "--sample-s", "1", "--out", str(tmp_path)], cwd=ROOT, check=True, timeout=180)
    report = json.loads((tmp_path / "soak.json").read_text())
    verdict = report["verdict"]
    assert verdict["contexts"] > 6 and verdict["endings"].get("done", 0) > 0
    assert verdict["errors"] == {} and verdict["server_errors"] == {} and verdict["leaked"] == {}
    assert report["timeline"] and all(s["rss_mib"] > 0 for s in report["timeline"])
