"""bench/gather_runs.py: a run's first chunks, from the growth of the cumulative counters over it, and the GPU
timeline's medians while streams ran."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scrape(chunks: int, to_slot: float, to_first: float, ttfa_sum: float, ttfa_count: int, relay=None) -> str:
    return "\n".join(["# HELP tts_engine_first_chunks first chunks sent, cumulative",
                      f"tts_engine_first_chunks {chunks}",
                      f"tts_engine_to_slot_seconds {to_slot}", f"tts_engine_to_first_chunk_seconds {to_first}",
                      f'tts_time_to_first_audio_seconds_sum{{api="websocket"}} {ttfa_sum}',
                      f'tts_time_to_first_audio_seconds_count{{api="websocket"}} {ttfa_count}',
                      *([f'tts_chunk_relay_seconds_sum{{api="websocket"}} {relay[0]}',
                         f'tts_chunk_relay_seconds_count{{api="websocket"}} {relay[1]}',
                         f"tts_chunk_arrival_seconds_sum {relay[0] / 3}",
                         f"tts_chunk_arrival_seconds_count {relay[1]}",
                         f"tts_chunk_core_seconds_sum {relay[0] / 6}",
                         f"tts_chunk_core_seconds_count {relay[1]}"] if relay else [])])


def test_each_run_gets_its_own_first_chunks_and_the_gpu_medians_while_streams_ran(tmp_path):
    runs = {"run1": (scrape(10, 0.1, 1.0, 2.0, 10), "1 tts_engine_active 0\n1 tts_engine_gpu_step_ms 5\n"),
            "run2": (scrape(30, 0.5, 4.0, 7.0, 30, relay=(3.0, 200)), "5 tts_engine_active 8\n5 tts_engine_gpu_step_ms 40\n"
                     "6 tts_engine_active 8\n6 tts_engine_gpu_step_ms 50\n6 tts_engine_gpu_idle_ms 2\n"
                     "7 tts_engine_active 0\n7 tts_engine_gpu_step_ms 1\n")}
    for name, (metrics, series) in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.txt").write_text(metrics)
        (tmp_path / name / "series.txt").write_text(series)
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gather_runs.py"), str(tmp_path), str(out)], check=True)
    gathered = json.loads(out.read_text())["runs"]
    assert gathered["run1"]["first_chunk"] == dict(chunks=10, ttfa=200.0, to_slot=10.0, slot_to_first_chunk=100.0,
                                                   rest=90.0)
    assert gathered["run2"]["first_chunk"] == dict(chunks=20, ttfa=250.0, to_slot=20.0, slot_to_first_chunk=150.0,
                                                   rest=80.0, relay=15.0, arrival=5.0, core=2.5)   # where served
    assert gathered["run1"]["gpu_ms"] == {} and gathered["run2"]["gpu_ms"] == {"step": 45.0, "idle": 2.0}
