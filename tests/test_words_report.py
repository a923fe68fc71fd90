"""bench/words_report.py: each run's aligner counters are its own (the server's /metrics less the run's before it)."""
from bench.words_report import rows


def run(level: int, late: float, turns: float, device_s: float, host_s: float, withdrawn: float) -> dict:
    metrics = [f"tts_aligner_turns {turns}", f"tts_aligner_device_seconds {device_s}",
               f"tts_aligner_turn_host_seconds {host_s}", f"tts_aligner_audio_seconds {turns * 60}",
               f"tts_engine_side_turns {turns * 1.5}", f"tts_engine_side_turns_withdrawn {withdrawn}",
               "tts_aligner_overdue_jobs 10", "tts_aligner_overdue_seconds 1.5", 'tts_errors_total{code="x"} 3']
    level = dict(value=level, words_late_share=late, word_lead_p1_s=-0.2, words_refused=0, contexts=600,
                 ttfa_p90_ms=170.0, fully_viable=1.0, audio_s_per_s=1040.0)
    return dict(metrics=metrics, load_bench=dict(levels=[level]))


def test_a_runs_turns_are_counted_from_the_run_before_it():
    gathered = {"runs": {"run1": run(512, 0.045, 300, 3.0, 2.1, 120), "run2": run(1024, 0.2, 500, 4.6, 3.0, 200)}}
    first, second = rows("main", gathered)
    assert "| main | 512 | 4.50% |" in first and "| 10.0 / 7.0 ms | 60 s | 120 of 450 | 150 ms |" in first
    assert "| main | 1,024 | 20.00% |" in second and "| 8.0 / 4.5 ms | 60 s | 80 of 300 | 0 ms |" in second
