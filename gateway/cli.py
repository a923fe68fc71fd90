"""`qwen-tts-gateway`: synth (one utterance to a WAV file), serve (the gateway), align (word timestamps)."""
import argparse
import os
import sys
import time

from . import limits, voice_map


def _add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint directory or hub repo id")
    src.add_argument("--dummy", metavar="VARIANT", help="random weights: tiny, tiny-<variant> or a published variant")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="float32|bfloat16|float16 (default: float32 on CPU, bfloat16 on CUDA)")


def _synth_parser(sub) -> None:
    p = sub.add_parser("synth", help="synthesize one utterance to a WAV file")
    _add_model_args(p)
    p.add_argument("--text", required=True)
    p.add_argument("--voice", help="CustomVoice speaker (default: the model's first) or a registered voice")
    p.add_argument("--instruct", help="style instruction (CustomVoice 1.7B) or voice description (VoiceDesign)")
    p.add_argument("--language", default="auto")
    p.add_argument("--ref-audio", help="reference WAV for voice cloning (Base)")
    p.add_argument("--ref-text", help="transcript of the reference audio (ICL clone)")
    p.add_argument("--x-vector-only", action="store_true", help="clone from the speaker embedding alone")
    p.add_argument("--greedy", action="store_true", help="no sampling (talker and code predictor)")
    p.add_argument("--seed", type=int)
    p.add_argument("--max-frames", type=int)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--non-streaming-text", action="store_true", help="whole text in the prompt (reference layout)")
    p.add_argument("--out", required=True, help="output WAV (24 kHz mono, 16-bit)")
    p.add_argument("--codes-out", help="write the generated codec frames as an int array (frames, 16) .npy")


def synth(args) -> int:
    import numpy as np

    from engine import Engine, SamplingParams, SynthesisRequest, VoiceRef
    from engine.api.wav import read_wav, write_wav

    t0 = time.perf_counter()
    engine = Engine.load(model=args.model, dummy=args.dummy, device=args.device, dtype=args.dtype).start()
    print(f"loaded {engine.info['model']} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    ref = None
    if args.ref_audio:
        audio, rate = read_wav(args.ref_audio)
        ref = VoiceRef(audio, rate, args.ref_text, args.x_vector_only)
    sampling = SamplingParams.greedy(seed=args.seed) if args.greedy else SamplingParams(seed=args.seed)
    request = SynthesisRequest(text=args.text, voice=args.voice, language=args.language, instruct=args.instruct,
                               ref=ref, sampling=sampling, max_frames=args.max_frames, ignore_eos=args.ignore_eos,
                               non_streaming_text=args.non_streaming_text)
    t0 = time.perf_counter()
    chunks = list(engine.submit(request).iter_blocking())
    elapsed = time.perf_counter() - t0
    engine.shutdown()
    pcm = np.concatenate([c.pcm for c in chunks])
    codes = np.concatenate([c.codes for c in chunks])
    write_wav(args.out, pcm)
    if args.codes_out:
        np.save(args.codes_out, codes.astype(np.int64))
    seconds = len(pcm) / 24000
    print(f"{codes.shape[0]} frames, {seconds:.2f}s audio in {elapsed:.2f}s (RTF {elapsed / max(seconds, 1e-9):.3f}), "
          f"finish: {chunks[-1].finish_reason}", file=sys.stderr)
    return 0


def _serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="run the streaming gateway: WebSocket protocol v1 and the HTTP API")
    _add_model_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", dest="api_keys", action="append", metavar="KEY",
                   default=[k for k in os.environ.get("QWEN_TTS_GATEWAY_API_KEYS", "").split(",") if k],
                   help="accept this key (repeatable; also QWEN_TTS_GATEWAY_API_KEYS, comma-separated); none: no auth")
    p.add_argument("--workers", type=int, help="front-end processes sharing the port and the engine core "
                                               "(default: a quarter of the CPU cores, 1 to 4)")
    p.add_argument("--replicas", metavar="N|auto", help="N whole serve units (engine core and front ends each) on Ray "
                                                        "Serve behind this one endpoint; auto: one per visible GPU")
    p.add_argument("--ray-address", help="with --replicas: the Ray cluster to join (auto: the local node's); "
                                         "default: start a Ray of this process's own")
    p.add_argument("--proxies", type=int, default=1, help="with --replicas: proxy processes sharing the port")
    p.add_argument("--max-sockets", type=int, default=4096, help="open WebSockets; beyond it new ones close with 1013")
    p.add_argument("--max-contexts-per-socket", type=int, default=16)
    p.add_argument("--max-active", type=int,
                   help="streams generating at once (the engine's batch size); beyond it new ones get `busy` "
                        "(default: 1024 on a GPU, 32 on a CPU)")
    p.add_argument("--max-step-ms", type=float,
                   help="measured capacity: refuse new streams while an engine step takes longer than this "
                        "(default: 64 on a GPU, i.e. 80%% of a frame's 80 ms; off on a CPU)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="share of the GPU's memory the engine core may take; the KV cache gets what the weights, "
                        "graphs and aligner leave of it")
    p.add_argument("--kv-tokens-per-stream", type=int,
                   help="a KV cache of max-active x this many tokens instead (default: by memory on a GPU, 2048 on "
                        "a CPU); a stream beyond the free cache gets `busy`")
    p.add_argument("--context-timeout", type=float, default=20.0, help="seconds an idle context stays open")
    p.add_argument("--max-message-bytes", type=int, default=65536)
    p.add_argument("--max-utterance-chars", type=int, default=5000, help="text between flushes")
    p.add_argument("--max-frames", type=int, help="cap on every utterance, in 80 ms frames (default: by text length)")
    p.add_argument("--shutdown-grace", type=float, default=10.0, help="seconds to finish closed text at shutdown")
    words = p.add_mutually_exclusive_group()
    words.add_argument("--aligner", metavar="DIR_OR_ID", help="Qwen3-ForcedAligner-0.6B checkpoint: word timestamps")
    words.add_argument("--dummy-aligner", nargs="?", const="published", choices=("published", "tiny"),
                       help="random aligner weights (published config, or tiny)")
    p.add_argument("--aligner-timeout", type=float, default=5.0,
                   help="seconds an alignment may take before the context's word timestamps are given up")
    p.add_argument("--voices-dir", default=os.environ.get("QWEN_TTS_GATEWAY_VOICES", "~/.cache/qwen-tts-gateway/voices"),
                   help="registered voices are stored here, in a folder per model, and survive restarts; replicas "
                        "share it (on several nodes: a shared mount); '' keeps them in memory only")
    p.add_argument("--voice-map", type=voice_map.parse, default=voice_map.OPENAI_VOICES, metavar="ALIAS=VOICE,...",
                   help="OpenAI voice names for POST /v1/audio/speech, over the default table (docs/protocol.md)")
    limits.add_arguments(p)
    p.add_argument("--log-level", default="info")


def serve(args, argv: list[str]) -> int:
    import logging

    from .core import EngineSpec, starts
    from .frontends import listening_socket, share, start_frontends
    from .server import GatewayServer, create_app, uvicorn_config
    from .service import Gateway, GatewayConfig

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.replicas:
        from .replicas.launch import run
        return run(args, argv)
    config = GatewayConfig(api_keys=tuple(args.api_keys), max_sockets=args.max_sockets,
                           max_contexts_per_socket=args.max_contexts_per_socket,
                           context_timeout=args.context_timeout, max_message_bytes=args.max_message_bytes,
                           max_utterance_chars=args.max_utterance_chars,
                           max_frames=args.max_frames, shutdown_grace=args.shutdown_grace,
                           aligner_timeout=args.aligner_timeout, voice_map=args.voice_map,
                           limits=limits.from_args(args))
    spec = EngineSpec(model=args.model, dummy=args.dummy, device=args.device, dtype=args.dtype,
                      max_active=args.max_active, kv_tokens_per_stream=args.kv_tokens_per_stream,
                      gpu_memory_utilization=args.gpu_memory_utilization, max_step_ms=args.max_step_ms,
                      aligner=args.aligner, dummy_aligner=args.dummy_aligner, voices_dir=args.voices_dir or None)
    workers = args.workers or max(1, min(4, (os.cpu_count() or 1) // 4))
    config = share(config, workers)
    gateway = Gateway(config, starts.spawn(spec, args.log_level))
    gateway.frontends = start_frontends(workers - 1, config, gateway.engine.address, args.host, args.port,
                                        args.log_level)
    server = GatewayServer(gateway, uvicorn_config(create_app(gateway), args.host, args.port, gateway, args.log_level))
    try:
        server.run(sockets=[listening_socket(args.host, args.port)])
    except KeyboardInterrupt:               # uvicorn re-raises the captured SIGINT once it has shut down gracefully
        pass
    return 0 if gateway.status != "failed" else 1


def _align_parser(sub) -> None:
    p = sub.add_parser("align", help="word timestamps of a recording and its transcript (Qwen3-ForcedAligner)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="Qwen3-ForcedAligner-0.6B checkpoint directory or hub repo id")
    src.add_argument("--dummy", nargs="?", const="published", choices=("published", "tiny"),
                     help="random weights of the published (default) or a tiny config")
    p.add_argument("--audio", required=True, help="WAV file (any rate; resampled to 16 kHz, mono)")
    p.add_argument("--text", required=True, help="its transcript")
    p.add_argument("--language", default="auto", help="english, chinese, japanese, korean, ... (auto: by script)")
    p.add_argument("--json", action="store_true", help='print [{"word", "start", "end"}, ...] (seconds)')
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)


def align(args) -> int:
    import json

    from aligner import Aligner
    from engine.api.wav import read_wav

    audio, rate = read_wav(args.audio)
    aligner = Aligner.load(model=args.model, dummy=args.dummy, device=args.device, dtype=args.dtype,
                           graphs=False)                # one alignment: capturing 53 graphs would cost more
    words = aligner.align(audio, args.text, args.language, rate)
    if args.json:
        print(json.dumps([{"word": w.word, "start": w.start, "end": w.end} for w in words], ensure_ascii=False))
    else:
        for w in words:
            print(f"{w.start:8.3f} {w.end:8.3f}  {w.word}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="qwen-tts-gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    _synth_parser(sub)
    _serve_parser(sub)
    _align_parser(sub)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args, argv[1:])
        return {"synth": synth, "align": align}[args.command](args)
    except Exception as exc:
        from engine.api.request import EngineInputError
        from engine.models.weights import ModelLoadError
        if isinstance(exc, (EngineInputError, ModelLoadError, FileNotFoundError)):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
