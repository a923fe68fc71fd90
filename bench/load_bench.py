"""The gateway load benchmark, the source of BENCHMARKS.md's headline: the real `qwen-tts-gateway serve` driven over
WebSockets by separate client processes (each an event loop with many sockets, watching its own health), at fixed
concurrency (closed loop: each slot runs contexts back to back) and at Poisson arrival rates.

python3 bench/load_bench.py --serve "--dummy 1.7B-CustomVoice --max-frames 150" --concurrency 1 512 1024 --rate 20 50

Each level runs --warmup seconds, then a steady-state window of --duration seconds. The contexts that START inside
the window are the level's contexts; the load stays on until every one of them has ended. Levels are the product
of --text x --text-layout x --word-timestamps x (--concurrency levels, then --rate levels)."""
import argparse
import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "integrations")]      # this checkout's gateway and client

from bench import load_dialects  # noqa: E402
from bench.load_client import ClientJob, run_client  # noqa: E402
from bench.load_dialects import DIALECTS  # noqa: E402
from bench.load_report import context_rows, level_line, level_row, summary, summary_line  # noqa: E402
from bench.load_server import ServeProcess, device_name, health  # noqa: E402
from bench.metrics_watch import MetricsWatch  # noqa: E402
from bench.load_socket import Speech  # noqa: E402
from bench.languages import LANGUAGES  # noqa: E402
from bench.workload import texts as bench_texts  # noqa: E402
from qwen_tts_client import protocol as p  # noqa: E402

CONNECT_TIMEOUT_S = 600       # for the client processes to open their sockets


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running server, ws://host:port (or http://)")
    target.add_argument("--serve", metavar="ARGS", help='start `serve ARGS --port P` itself, e.g. "--dummy tiny"')
    ap.add_argument("--serve-timeout", type=float, default=1200, help="seconds for serve's /health to answer 200")
    ap.add_argument("--api-key")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[], help="closed-loop levels: contexts at once")
    ap.add_argument("--rate", type=float, nargs="+", default=[], help="Poisson levels: context arrivals per second")
    ap.add_argument("--text", nargs="+", choices=("whole", "streamed"), default=["streamed"],
                    help="whole: one text message that ends its context; streamed: pieces, then end")
    ap.add_argument("--text-layout", nargs="+", choices=("auto", *p.TEXT_LAYOUTS), default=["auto"],
                    help="the first message's text_layout (auto: none, the gateway's rule)")
    ap.add_argument("--word-timestamps", nargs="+", choices=("off", "on"), default=["off"])
    ap.add_argument("--dialect", nargs="+", choices=DIALECTS, default=["ours"],
                    help="what the sockets speak: our protocol, or the server's Cartesia or ElevenLabs routes")
    ap.add_argument("--stream-chars", type=int, default=4, help="streamed text: characters per piece")
    ap.add_argument("--stream-ms", type=float, default=15.0, help="streamed text: ms between pieces")
    ap.add_argument("--lang", nargs="+", choices=sorted(LANGUAGES), default=[None],
                    help="levels per language: its texts (bench/languages.py) streamed as an LLM writes them, "
                         "Chinese, Japanese and Korean 1-2 characters a piece, the others a word, every --piece-ms; "
                         "the request's language is the text's unless --language (default: bench/workload.py's in "
                         "--stream-chars)")
    ap.add_argument("--piece-ms", type=float, nargs=2, default=[20.0, 30.0], help="with --lang: ms between pieces, "
                    "uniform in [MIN, MAX]")
    ap.add_argument("--pieces", choices=("chars", "tokens"), default="chars", help="with --lang: chars, as --lang "
                    "says; tokens, a Qwen LLM's tokens (the TTS tokenizer's BPE, a token a piece: 1.6 characters in "
                    "Chinese, 1.4 in Japanese)")
    ap.add_argument("--contexts-per-socket", type=int, default=1, help="concurrent contexts sharing one socket")
    ap.add_argument("--clients", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="client processes")
    ap.add_argument("--duration", type=float, default=30.0, help="steady-state window, seconds")
    ap.add_argument("--warmup", type=float, default=15.0, help="seconds before the window opens")
    ap.add_argument("--ramp", type=float, default=10.0, help="closed loop: first contexts spread over this many s")
    ap.add_argument("--burst", action="store_true", help="closed loop: a level's contexts are the slots' first ones, "
                    "all arriving within --ramp s (--ramp 1: a burst of --concurrency contexts in one second), not "
                    "the window's; the load goes on, closed loop, until they have ended")
    ap.add_argument("--drain-timeout", type=float, default=120.0, help="after the window: the most to wait for "
                                                                         "its contexts to end (then: unfinished)")
    ap.add_argument("--idle-timeout", type=float, default=60.0, help="a context silent this long: client_timeout")
    ap.add_argument("--barge-in-ms", type=float, default=0.0, help="each context cancelled (with played_ms) once a "
                    "real-time player from its first chunk played this much: the `cancelled` answer's time is reported")
    ap.add_argument("--min-chars", type=int, default=20)
    ap.add_argument("--max-chars", type=int, default=500)
    ap.add_argument("--voice")
    ap.add_argument("--language")
    ap.add_argument("--instruct")
    ap.add_argument("--sample-rate", type=int, choices=p.SAMPLE_RATES, default=24000)
    ap.add_argument("--encoding", choices=p.ENCODINGS, default="pcm_s16le")
    ap.add_argument("--compression", choices=("deflate", "none"), default="deflate",
                    help="permessage-deflate, as the websockets client of the integrations negotiates by default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", help="the summary line's prefix (default: this machine's GPU and the model)")
    ap.add_argument("--out", default=f"bench/results/load-{time.strftime('%Y%m%d-%H%M%S')}",
                    help="directory: load_bench.json, contexts.jsonl, serve.log")
    args = ap.parse_args(argv)
    if args.concurrency and not args.burst and args.ramp > args.warmup:   # a level of one context might count none
        ap.error(f"--ramp {args.ramp:g} outlasts --warmup {args.warmup:g}: slots would still be starting when the "
                 "window opens; give --ramp <= --warmup")
    return args


def levels(args) -> list[dict]:
    loads = [("concurrency", c) for c in args.concurrency] + [("rate", r) for r in args.rate]
    return [dict(mode=mode, value=value, text=text, text_layout=layout, word_timestamps=words == "on", lang=lang,
                 contexts_per_socket=args.contexts_per_socket, dialect=dialect,
                 burst=args.burst and mode == "concurrency")
            for lang in args.lang for text in args.text for layout in args.text_layout
            for words in args.word_timestamps for dialect in args.dialect for mode, value in loads]


def client_jobs(args, level: dict, ws_base: str, texts: list[str]) -> list[ClientJob]:
    """The level's load split over the client processes (Poisson: a sum of Poisson processes is one)."""
    closed = level["mode"] == "concurrency"
    n = min(args.clients, level["value"]) if closed else args.clients
    lang, streamed = level["lang"], level["text"] == "streamed"
    options = dict(voice=args.voice, language=args.language or LANGUAGES.get(lang), instruct=args.instruct,
                   word_timestamps=level["word_timestamps"],
                   text_layout=None if level["text_layout"] == "auto" else level["text_layout"])
    speech = Speech({k: v for k, v in options.items() if v is not None}, args.stream_chars if streamed else 0,
                    args.stream_ms, args.idle_timeout, lang if streamed else None, tuple(args.piece_ms), args.pieces,
                    args.barge_in_ms)
    share = [dict(concurrency=level["value"] // n + (i < level["value"] % n)) if closed else
             dict(rate=level["value"] / n) for i in range(n)]
    dialect = level["dialect"]
    ws_url = load_dialects.url(dialect, ws_base, args.voice, args.sample_rate, args.encoding)
    return [ClientJob(ws_url, load_dialects.headers(dialect, args.api_key),
                      None if args.compression == "none" else args.compression, speech, texts, **share[i],
                      dialect=dialect, sample_rate=args.sample_rate, encoding=args.encoding,
                      contexts_per_socket=args.contexts_per_socket, warmup=args.warmup, ramp=args.ramp,
                      burst=level["burst"],
                      duration=args.duration, drain_timeout=args.drain_timeout, seed=args.seed * 1000 + i)
            for i in range(n)]


def run_level(jobs: list[ClientJob]) -> list[dict]:
    """One process per job; they start their load together once all of them have connected."""
    mp = multiprocessing.get_context("spawn")
    barrier = mp.Barrier(len(jobs) + 1, timeout=CONNECT_TIMEOUT_S)
    pipes, procs = [], []
    for job in jobs:
        receive, send = mp.Pipe(duplex=False)
        procs.append(mp.Process(target=run_client, args=(job, barrier, send), daemon=True))
        procs[-1].start()
        send.close()                                     # the child's end: recv() fails if the child dies
        pipes.append(receive)
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass                                             # a client failed: its result says why
    results = [conn.recv() for conn in pipes]
    for proc in procs:
        proc.join()
    failed = [r["failed"] for r in results if "failed" in r]
    if failed:
        raise RuntimeError(f"a load client failed:\n{failed[0]}")
    return results


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.concurrency and not args.rate:
        sys.exit("give --concurrency and/or --rate levels")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = ServeProcess(args.serve, out / "serve.log") if args.serve else None
    try:
        target = urlsplit(server.url if server else args.url)
        secure = target.scheme in ("wss", "https")
        http_url = f"{'https' if secure else 'http'}://{target.netloc}"
        info = server.wait_ready(args.serve_timeout) if server else health(http_url)
        if info is None:
            sys.exit(f"{http_url}/health is not 200: the server is not ready")
        ws_base = f"{'wss' if secure else 'ws'}://{target.netloc}"
        if args.dialect != ["ours"] and (args.encoding != "pcm_s16le" or not args.voice):
            sys.exit("--dialect cartesia/elevenlabs: give --voice (a speaker or clone); their audio is pcm_s16le")
        texts = {lang: bench_texts(1000, args.seed, args.min_chars, args.max_chars, lang) for lang in args.lang}
        label = args.label or f"{device_name()} {info['model'].removeprefix('dummy:')}"
        report = dict(label=label, server=info, args=vars(args), levels=[], summary={})
        print(f"{label}: {args.serve or args.url}, {args.clients} client processes, window {args.duration:g} s "
              f"after {args.warmup:g} s", flush=True)
        with open(out / "contexts.jsonl", "w") as contexts:
            for level in levels(args):
                with MetricsWatch(http_url) as watch:
                    results = run_level(client_jobs(args, level, ws_base, texts[level["lang"]]))
                row = dict(level_row(level, results, args.duration), metrics_p10_p50_p90_max=watch.summary())
                print(level_line(row), flush=True)
                contexts.writelines(json.dumps(c) + "\n" for c in context_rows(row["name"], results))
                report["levels"].append(row)
                report["summary"] = summary(report["levels"])
                (out / "load_bench.json").write_text(json.dumps(report, indent=1))
                time.sleep(1)                            # the server closes the level's sockets before the next
        print(summary_line(label, report["summary"]), flush=True)
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
