"""The gateway load bench against the real `serve` on the tiny dummy engine, a few seconds per mode: every field is
there, contexts complete and nothing but `busy` fails. No timing is asserted."""
import json
import random
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from bench.load_server import ServeProcess
from bench.load_socket import Speech

pytestmark = pytest.mark.slow                # `serve` processes

ROOT = Path(__file__).resolve().parent.parent
SERVE = "--dummy tiny --device cpu --max-frames 8"
SHORT = ["--duration", "3", "--warmup", "1", "--ramp", "0.5", "--clients", "1"]
LEVEL_FIELDS = {"name", "mode", "value", "text", "text_layout", "word_timestamps", "contexts_per_socket", "contexts",
                "completed", "busy", "errors", "alignment_unavailable", "words_refused", "fully_viable", "viability",
                "viable_share_mean", "ttfa_p50_ms", "ttfa_p90_ms", "ttfa_p95_ms", "ttfa_p99_ms", "rtf_p50", "rtf_p90",
                "underrun_s_mean", "audio_s_per_s", "sockets", "client_cpu_max", "client_lag_p99_ms_max",
                "client_lag_max_ms", "client_saturated", "clients", "metrics_p10_p50_p90_max"}


def load_bench(out: Path, *args: str) -> dict:
    subprocess.run([sys.executable, "bench/load_bench.py", *SHORT, *args, "--out", str(out)], cwd=ROOT, check=True,
                   timeout=120)
    report = json.loads((out / "load_bench.json").read_text())
    for row in report["levels"]:
        assert LEVEL_FIELDS <= row.keys()
        assert row["completed"] > 0 and row["errors"] == {}, row
        assert {"cpu", "lag_p50_ms", "lag_p99_ms", "lag_max_ms", "saturated"} <= row["clients"][0].keys()
    contexts = [json.loads(line) for line in (out / "contexts.jsonl").read_text().splitlines()]
    assert len(contexts) == sum(row["contexts"] for row in report["levels"])
    return report


def test_closed_loop_streamed_text_two_contexts_per_socket(tmp_path):
    report = load_bench(tmp_path, "--serve", SERVE, "--concurrency", "4", "--contexts-per-socket", "2",
                        "--text", "streamed", "--stream-chars", "4", "--stream-ms", "15")
    [row] = report["levels"]
    assert (row["mode"], row["value"], row["text"], row["sockets"]) == ("concurrency", 4, "streamed", 2)
    assert "streamed_contexts_99" in report["summary"]
    step = row["metrics_p10_p50_p90_max"]["tts_engine_step_ms"]          # /metrics sampled while the level ran
    assert len(step) == 4 and step == sorted(step) and step[-1] > 0
    assert report["server"]["model"] == "dummy:tiny"
    assert "ready" in (tmp_path / "serve.log").read_text()


def test_whole_text_in_each_layout_at_one_context(tmp_path):
    report = load_bench(tmp_path, "--serve", SERVE, "--concurrency", "1", "--text", "whole",
                        "--text-layout", "auto", "streaming")
    assert [(row["name"], row["text_layout"]) for row in report["levels"]] == [
        ("c1_whole", "auto"), ("c1_whole_streaming_layout", "streaming")]
    assert {"ws_ttfa_p50_ms", "ws_whole_streaming_layout_ttfa_p50_ms"} <= report["summary"].keys()


def test_a_burst_beyond_the_engine_slots_is_queued_not_refused(tmp_path):
    """Every slot's first context at once, twice the engine's slots: the second half waits for the first to end."""
    server = ServeProcess(SERVE + " --max-active 2 --max-queue-ms 20000", tmp_path / "own-serve.log")
    try:
        server.wait_ready(120)
        report = load_bench(tmp_path, "--url", server.url.replace("http", "ws", 1), "--concurrency", "4", "--burst",
                            "--ramp", "0", "--warmup", "0", "--text", "streamed")
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
            metrics = dict(line.rsplit(" ", 1) for line in response.read().decode().splitlines()
                           if line and not line.startswith("#"))
    finally:
        assert server.stop() == 0
    [row] = report["levels"]
    assert (row["name"], row["burst"], row["contexts"], row["busy"]) == ("burst4_streamed", True, 4, 0)
    assert report["summary"]["burst4_busy"] == 0 and report["summary"]["burst4_ttfa_p99_ms"] > 0
    assert float(metrics["tts_admission_queued_requests"]) >= 2             # the burst's second half waited
    assert float(metrics["tts_admission_queue_expired_requests"]) == 0


def test_poisson_whole_text_with_word_timestamps(tmp_path):
    server = ServeProcess(SERVE + " --dummy-aligner tiny", tmp_path / "own-serve.log")
    try:
        server.wait_ready(120)
        report = load_bench(tmp_path, "--url", server.url.replace("http", "ws", 1), "--rate", "4", "--text", "whole",
                            "--word-timestamps", "on")
    finally:
        assert server.stop() == 0
    [row] = report["levels"]
    assert (row["mode"], row["value"], row["text"], row["word_timestamps"]) == ("rate", 4, "whole", True)
    assert row["words"] > 0 and {"word_lead_p50_s", "word_lead_p1_s", "word_lead_min_s"} <= row.keys()
    assert 0 <= row["words_late_share"] <= 1
    assert 0 <= row["words_late_opening"] <= row["words_late"] and 0 <= row["words_late_with_last"] <= row["words_late"]
    assert {"poisson4_words_whole_ttfa_p95_ms", "poisson4_words_whole_fully_viable"} <= report["summary"].keys()


def test_languages_stream_as_an_llm_writes_them(tmp_path):
    """Chinese 1-2 characters a piece, English a word, 20-30 ms apart; a level per language, tagged with it."""
    speech = Speech({}, lang="zh")
    timed = speech.timed_pieces("您好，您订购的iPhone 15已经发货了。", random.Random(0))
    assert {len(piece) for _, piece in timed} == {1, 2} and "".join(piece for _, piece in timed).startswith("您好")
    gaps = [b - a for (a, _), (b, _) in zip(timed, timed[1:])]
    assert min(gaps) >= 0.020 and max(gaps) <= 0.030
    english = [piece for _, piece in Speech({}, lang="en").timed_pieces("Hello there, friend.", random.Random(0))]
    assert english == ["Hello", " there,", " friend."]
    report = load_bench(tmp_path, "--serve", SERVE, "--concurrency", "2", "--text", "streamed", "--lang", "zh", "en",
                        "--max-chars", "60")
    assert [(row["name"], row["lang"]) for row in report["levels"]] == [("c2_zh_streamed", "zh"),
                                                                       ("c2_en_streamed", "en")]
    assert {"zh_streamed_contexts_99", "en_streamed_contexts_99"} <= report["summary"].keys()


def test_one_workload_in_our_protocol_and_in_each_dialect(tmp_path):
    report = load_bench(tmp_path, "--serve", SERVE + " --dummy-aligner tiny", "--concurrency", "2", "--voice", "ryan",
                        "--dialect", "ours", "cartesia", "elevenlabs", "--word-timestamps", "on")
    rows = {row["dialect"]: row for row in report["levels"]}
    assert list(rows) == ["ours", "cartesia", "elevenlabs"]
    assert [row["name"] for row in rows.values()] == ["c2_words_streamed", "c2_cartesia_words_streamed",
                                                       "c2_elevenlabs_words_streamed"]
    assert all(row["words"] > 0 for row in rows.values())                # timings arrive in every dialect
    assert {"cartesia_words_streamed_contexts_99", "elevenlabs_words_streamed_contexts_99"} <= report["summary"].keys()


def test_metrics_sampled_during_a_level_keep_each_gauges_spread():
    from bench.metrics_watch import MetricsWatch, parse
    assert parse("# HELP x\ntts_engine_step_ms 12.5\ntts_aligner_used 0.25\ntts_frames_total 9\n") == \
        {"tts_engine_step_ms": 12.5, "tts_aligner_used": 0.25}
    watch = MetricsWatch("http://127.0.0.1:9")
    watch.samples = [{"tts_engine_step_ms": float(v)} for v in range(11)]
    assert watch.summary() == {"samples": 11, "missed": 0, "tts_engine_step_ms": [1.0, 5.0, 9.0, 10.0]}


def test_why_words_were_refused_is_kept_with_three_messages_whole():
    from bench.load_report import words_reasons
    said = [f"the device has no time left ({d:.2f} device-s/s wanted, 0.30 planned)" for d in (0.41, 0.52, 0.63)]
    got = words_reasons([dict(words_reasons=said[:2]), dict(words_reasons=said[2:] + ["timed out"])])
    assert got["words_reasons"] == {"the device has no time left (N device-s/s wanted, N planned)": 3, "timed out": 1}
    assert got["words_reason_samples"] == [said[0], said[2], "timed out"]
    assert words_reasons([dict(words_reasons=[])]) == {}


def test_a_ramp_past_the_warm_up_is_refused_before_any_load(capsys):
    from bench.load_bench import parse_args
    url = ["--url", "ws://127.0.0.1:9"]
    with pytest.raises(SystemExit):                      # one context started at 7 s of a 2 + 6 s window counted none
        parse_args(url + ["--concurrency", "1", "--warmup", "2", "--duration", "6"])
    assert "--ramp 10 outlasts --warmup 2" in capsys.readouterr().err
    assert parse_args(url + ["--concurrency", "1", "--warmup", "2", "--ramp", "0"]).ramp == 0
    assert parse_args(url + ["--concurrency", "1024", "--burst", "--ramp", "1", "--warmup", "0"]).burst
    assert parse_args(url + ["--rate", "20", "--warmup", "2"]).rate == [20.0]


def test_barge_ins_report_when_cancelled_answers(tmp_path):
    """Each context cancelled with played_ms 200 once its player got there: every `cancelled` timed and holding the
    spoken split (words on), none counted as an error."""
    server = ServeProcess(SERVE + " --dummy-aligner tiny", tmp_path / "own-serve.log")
    try:
        server.wait_ready(120)
        subprocess.run([sys.executable, "bench/load_bench.py", *SHORT, "--url", server.url.replace("http", "ws", 1),
                        "--concurrency", "2", "--text", "streamed", "--word-timestamps", "on", "--barge-in-ms", "200",
                        "--out", str(tmp_path)], cwd=ROOT, check=True, timeout=120)
    finally:
        assert server.stop() == 0
    [row] = json.loads((tmp_path / "load_bench.json").read_text())["levels"]
    assert row["barge_ins"] > 0 and row["errors"] == {} and row["spoken_unknown"] == 0
    assert 0 <= row["cancel_answer_p50_ms"] <= row["cancel_answer_p99_ms"]
