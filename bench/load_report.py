"""The load bench's numbers: one row per level from its client processes' results, its table line, and the summary
(the machine-readable line of BENCHMARKS.md)."""
import re
from collections import Counter

import numpy as np

from bench.metrics import summarize
from qwen_tts_client import protocol as p


def text_tag(row: dict) -> str:
    dialect, layout = row.get("dialect", "ours"), row.get("text_layout", "auto")     # a forced layout is tagged
    tag = ("" if dialect == "ours" else f"{dialect}_") + (f"{row['lang']}_" if row.get("lang") else "") \
        + ("words_" if row["word_timestamps"] else "") + row["text"]
    return tag if layout == "auto" else f"{tag}_{layout}_layout"


def level_name(row: dict) -> str:
    kind = "burst" if row.get("burst") else "c" if row["mode"] == "concurrency" else "poisson"
    return f"{kind}{row['value']:g}_{text_tag(row)}"


def refusals(results: list[dict]) -> dict:
    """How soon `busy` came after a context's first text, and why (the server's message, its numbers as N)."""
    busy = [r for result in results for r in result.get("refusals", [])]
    if not busy:
        return {}
    after = np.array([s for s, _ in busy]) * 1000
    reasons = Counter(re.sub(r"\d+", "N", message) for _, message in busy)
    return dict(busy_after_p50_ms=float(np.percentile(after, 50)), busy_after_p99_ms=float(np.percentile(after, 99)),
                busy_reasons=dict(reasons.most_common()))


def words_reasons(results: list[dict]) -> dict:
    """Why contexts lost or were refused word timestamps (the messages, numbers as N), and three messages whole, from
    the start, middle and end of the run."""
    words = [message for r in results for message in r.get("words_reasons", [])]
    if not words:
        return {}
    reasons = Counter(re.sub(r"[-+]?\d+(\.\d+)?", "N", message) for message in words)
    return dict(words_reasons=dict(reasons.most_common()),
                words_reason_samples=[words[i] for i in sorted({0, len(words) // 2, len(words) - 1})])


def level_row(level: dict, results: list[dict], duration: float) -> dict:
    """`level` (its load and kind of text) with the totals over the contexts that started in the window."""
    contexts = [c for r in results for c in r["contexts"]]          # (StreamRecord, end code, words error code)
    completed = [record for record, code, _ in contexts if code is None]
    barged = [record for record, code, _ in contexts if code == "cancelled" and record.cancel_answer_s is not None]
    errors = Counter(code for record, code, _ in contexts if code is not None and record.cancel_answer_s is None)
    for r in results:
        errors.update({f"no_context:{code}": n for code, n in r["stray_errors"].items()})
    row = dict(name=level_name(level), **level, contexts=len(contexts), completed=len(completed),
               busy=errors.pop(p.BUSY, 0), errors=dict(errors),
               alignment_unavailable=sum(words == p.ALIGNMENT_UNAVAILABLE for *_, words in contexts),
               words_refused=sum(words == p.WORDS_REFUSED for *_, words in contexts),
               fully_viable=sum(r.viable for r in completed) / max(len(contexts), 1))
    if completed:
        row.update(summarize(completed, duration))
        for unused in ("streams", "viability_engine", "wall_s"):
            del row[unused]
    row["audio_s_per_s"] = sum(r["window_audio_s"] for r in results) / duration
    row.update(refusals(results))
    row.update(words_reasons(results))
    leads = [lead for record in completed for lead in record.word_leads()]
    if leads:
        row.update(words=len(leads), word_lead_p50_s=float(np.percentile(leads, 50)),
                   word_lead_p1_s=float(np.percentile(leads, 1)), word_lead_min_s=float(min(leads)),
                   words_late_share=float(np.mean(np.array(leads) < 0)))
        late, opening, with_last = np.sum([record.late_words() for record in completed], axis=0)
        row.update(words_late_opening=int(opening), words_late_with_last=int(with_last), words_late=int(late))
    if barged:
        answers = np.array([r.cancel_answer_s for r in barged]) * 1000
        row.update(barge_ins=len(barged), cancel_answer_p50_ms=float(np.percentile(answers, 50)),
                   cancel_answer_p99_ms=float(np.percentile(answers, 99)),
                   spoken_unknown=sum(not r.spoken_known for r in barged))
    health = [r["health"] for r in results]
    row.update(sockets=sum(r["sockets"] for r in results), client_cpu_max=max(h["cpu"] for h in health),
               client_lag_p99_ms_max=max(h["lag_p99_ms"] for h in health),
               client_lag_max_ms=max(h["lag_max_ms"] for h in health),
               client_saturated=any(h["saturated"] for h in health), clients=health)
    return row


def level_line(row: dict) -> str:
    errors = sum(row["errors"].values())
    line = f"{row['name']:24s} | {row['contexts']:5d} ctx {row['busy']:4d} busy {errors:4d} err"
    if row["busy"]:
        line += f" (busy after p50/99 {row['busy_after_p50_ms']:.0f} {row['busy_after_p99_ms']:.0f} ms)"
    if row["completed"]:
        line += (f" | ttfa p50/90/95/99 {row['ttfa_p50_ms']:6.0f} {row['ttfa_p90_ms']:6.0f} {row['ttfa_p95_ms']:6.0f}"
                 f" {row['ttfa_p99_ms']:6.0f} ms | fully viable {100 * row['fully_viable']:5.1f}% share "
                 f"{100 * row['viable_share_mean']:5.1f}% | underrun {row['underrun_s_mean']:.3f} s | rtf p50 "
                 f"{row['rtf_p50']:.3f}")
    line += f" | {row['audio_s_per_s']:7.1f} audio-s/s"
    if row["word_timestamps"]:
        line += f" | {row['alignment_unavailable']} alignment_unavailable, {row['words_refused']} words_refused"
    if "words" in row:
        line += (f" | words lead p50 {row['word_lead_p50_s']:.2f} p1 {row['word_lead_p1_s']:.2f} s, "
                 f"{100 * row['words_late_share']:.2f}% late ({row['words_late_opening']} of {row['words_late']} among a "
                 f"context's first three, {row['words_late_with_last']} with its last words)")
    if "barge_ins" in row:
        line += (f" | {row['barge_ins']} barge-ins: cancelled after p50/99 {row['cancel_answer_p50_ms']:.0f} "
                 f"{row['cancel_answer_p99_ms']:.0f} ms, {row['spoken_unknown']} without a spoken split")
    line += f" | client cpu {100 * row['client_cpu_max']:3.0f}% lag p99 {row['client_lag_p99_ms_max']:.1f} ms"
    return line + (" | CLIENT SATURATED: not the server's numbers" if row["client_saturated"] else "")


def summary(rows: list[dict]) -> dict:
    """Per kind of text: the largest closed-loop level with >= 99% of its contexts fully viable (busy and errors
    count against it) and its TTFA p90, one context's TTFA p50, each Poisson rate's TTFA p95, and each burst's `busy`,
    TTFA p99 and viability (streamed text untagged: the headline's burstN_busy)."""
    out = {}
    for row in rows:
        tag = text_tag(row)
        if row.get("burst"):
            key = f"burst{row['value']}" + ("" if tag == "streamed" else f"_{tag}")
            out.update({f"{key}_busy": row["busy"], f"{key}_fully_viable": round(row["fully_viable"], 3)})
            if row["completed"]:
                out[f"{key}_ttfa_p99_ms"] = round(row["ttfa_p99_ms"])
            continue
        if row["mode"] == "rate":
            if row["completed"]:
                out[f"poisson{row['value']:g}_{tag}_ttfa_p95_ms"] = round(row["ttfa_p95_ms"])
            out[f"poisson{row['value']:g}_{tag}_fully_viable"] = round(row["fully_viable"], 3)
            continue
        out.setdefault(f"{tag}_contexts_99", 0)
        if row["word_timestamps"]:                # per level: the words' own criteria
            out[f"c{row['value']}_{tag}_alignment_unavailable"] = row["alignment_unavailable"]
            out[f"c{row['value']}_{tag}_words_refused"] = row["words_refused"]
            if "words" in row:
                out[f"c{row['value']}_{tag}_words_late_share"] = round(row["words_late_share"], 4)
                out[f"c{row['value']}_{tag}_word_lead_p1_s"] = round(row["word_lead_p1_s"], 2)
        if row["value"] == 1 and row["completed"]:
            out[f"ws_{'' if tag == 'whole' else tag + '_'}ttfa_p50_ms"] = round(row["ttfa_p50_ms"])
        if row["fully_viable"] >= 0.99 and row["value"] >= out[f"{tag}_contexts_99"]:
            out[f"{tag}_contexts_99"] = row["value"]
            out[f"{tag}_ttfa_p90_ms"] = round(row["ttfa_p90_ms"])
            if "word_lead_p1_s" in row:
                out[f"{tag}_word_lead_p1_s"] = round(row["word_lead_p1_s"], 2)
    saturated = [row["name"] for row in rows if row["client_saturated"]]
    if saturated:
        out["client_saturated"] = ",".join(saturated)
    return out


def summary_line(label: str, values: dict) -> str:
    return f"{label} gateway: " + " ".join(f"{k}={v}" for k, v in values.items())


def context_rows(level: str, results: list[dict]) -> list[dict]:
    """One row per context of the window: how it ended and, when it completed, its metrics."""
    rows = []
    for record, code, _ in (c for r in results for c in r["contexts"]):
        rows.append(dict(level=level, chars=record.chars, end=code or "done"))
        if code is None:
            rows[-1].update(ttfa_ms=1000 * record.ttfa, rtf=record.rtf, audio_s=record.audio_s,
                            fully_viable=record.viable, viable_share=record.viable_share,
                            underrun_s=record.underrun_s(), word_lead_min_s=min(record.word_leads(), default=None))
    return rows
