"""Word timestamps under load, one row a run, from `bench/gather_runs.py` JSONs (a `bench/gpu_ab.sh` call's
$OUT/REV.json): the client's late words, refusals, TTFA and viability beside the aligner's turns over the run
(/metrics' growth: a run's counters less the run's before it on the same server): device and host time a turn,
audio a turn, turns the engine withdrew, the opening's wait. Markdown, as BENCHMARKS.md's tables.

python3 bench/words_report.py A.json [B.json ...]     (or a bench/results file that keeps several calls' trees)"""
import json
import sys
from pathlib import Path

HEADER = ("| build | contexts | late | lead p1 | words refused | TTFA p90 | fully viable | audio-s/s "
          "| turn: device / host | audio a turn | withdrawn | opening wait |")


def scrape(lines: list[str]) -> dict:
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in lines if " " in line)}


def rows(label: str, gathered: dict) -> list[str]:
    before, out = {}, []
    for run in gathered["runs"].values():
        now, was = scrape(run["metrics"]), before
        grew = lambda name: now.get(name, 0.0) - was.get(name, 0.0)
        before = now
        for level in run["load_bench"]["levels"]:
            turns, overdue = max(grew("tts_aligner_turns"), 1.0), max(grew("tts_aligner_overdue_jobs"), 1.0)
            out.append(
                f"| {label} | {level['value']:,} | {100 * level['words_late_share']:.2f}% | "
                f"{level['word_lead_p1_s']:+.2f} s | {level['words_refused']} of {level['contexts']} | "
                f"{level['ttfa_p90_ms']:.0f} ms | {100 * level['fully_viable']:.1f}% | {level['audio_s_per_s']:,.0f} | "
                f"{1000 * grew('tts_aligner_device_seconds') / turns:.1f} / "
                f"{1000 * grew('tts_aligner_turn_host_seconds') / turns:.1f} ms | "
                f"{grew('tts_aligner_audio_seconds') / turns:.0f} s | "
                f"{grew('tts_engine_side_turns_withdrawn'):.0f} of {grew('tts_engine_side_turns'):.0f} | "
                f"{1000 * grew('tts_aligner_overdue_seconds') / overdue:.0f} ms |")
    return out


if __name__ == "__main__":
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for path in sys.argv[1:]:
        data = json.loads(Path(path).read_text())
        calls = data.get("calls", {Path(path).stem: {"": data}})      # a results file of several calls, or one tree
        for call, trees in calls.items():
            for tree, gathered in trees.items():
                if isinstance(gathered, dict) and "runs" in gathered:
                    print("\n".join(rows(" ".join(filter(None, (call, tree))), gathered)))
