"""`qwen-tts-gateway serve`: the streaming gateway (WebSocket protocol v1 and the HTTP API)."""
import os

from .. import cache_dir, limits, voice_map
from . import DefaultsShown, add_model_args


def add_parser(sub):
    p = sub.add_parser("serve", help="run the streaming gateway: WebSocket protocol v1 and the HTTP API",
                       formatter_class=DefaultsShown)
    add_model_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on; serve refuses one already in use")
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
    p.add_argument("--max-contexts-per-socket", type=int, default=16, help="open contexts on one WebSocket")
    p.add_argument("--max-active", type=int,
                   help="streams generating at once (the engine's batch size); beyond it new ones get `busy` "
                        "(default: 2048 on a GPU of 64 GiB or more, 1024 on a smaller one, 32 on a CPU)")
    p.add_argument("--max-step-ms", type=float,
                   help="measured capacity: refuse new streams while an engine step takes longer than this "
                        "or would with the streams joining (default: 64 on a GPU, i.e. 80%% of a frame's 80 ms; off "
                        "on a CPU)")
    p.add_argument("--max-queue-ms", type=float, default=500.0,
                   help="a new stream without room yet waits for it this long at most, in order, when the engine "
                        "expects room by then (streams ending, the step back under --max-step-ms); else, or once "
                        "waited this long, `busy` (0: `busy` at once)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="share of the GPU's memory (on a CPU: of the RAM available at start-up) the engine core may "
                        "take; the KV cache gets what the weights, graphs and aligner leave of it")
    p.add_argument("--kv-tokens-per-stream", type=int,
                   help="a KV cache of max-active x this many tokens instead (default: by memory; on a CPU at most "
                        "2048 a stream); a stream beyond the free cache gets `busy`")
    p.add_argument("--kv-cache-dtype", choices=("auto", "fp8"), default="auto",
                   help="the talker's KV cache: auto (the model's dtype) or fp8 (e4m3, unscaled: half the bytes a "
                        "token, so the attention reads half; its error is bench/gpu_check.py's to bound)")
    p.add_argument("--weights-dtype", choices=("auto", "fp8"), default="auto",
                   help="the talker's and code predictor's projections past a few rows: auto (the model's dtype) or "
                        "fp8 (e4m3 with a scale per channel, activations per row, as vLLM's dynamic fp8; the "
                        "few-row kernels keep bf16; its error is bench/gpu_check.py's to bound)")
    p.add_argument("--context-timeout", type=float, default=20.0, help="seconds an idle context stays open")
    p.add_argument("--max-message-bytes", type=int, default=65536, help="largest WebSocket text message")
    p.add_argument("--max-utterance-chars", type=int, default=5000, help="text between flushes")
    p.add_argument("--max-frames", type=int, help="cap on every utterance, in 80 ms frames (default: by text length)")
    p.add_argument("--shutdown-grace", type=float, default=10.0, help="seconds to finish closed text at shutdown")
    words = p.add_mutually_exclusive_group()
    words.add_argument("--aligner", metavar="DIR_OR_ID", help="Qwen3-ForcedAligner-0.6B checkpoint: word timestamps")
    words.add_argument("--dummy-aligner", nargs="?", const="auto", choices=("auto", "published", "tiny"),
                       help="random aligner weights: the published config or tiny; auto (the default): published on "
                            "a GPU, tiny on a CPU (where the published one takes longer than --aligner-timeout)")
    p.add_argument("--dummy-aligner-times", choices=("speaker", "model"), default="speaker",
                   help="a dummy aligner's word times: a speaker's at an even pace (the default: speech's job flow, "
                        "its forward still run), or its random model's (every word at its window's end)")
    p.add_argument("--aligner-timeout", type=float,
                   help="seconds an alignment may take before the context's word timestamps are given up (default: "
                        "5 on a GPU, 60 on a CPU, where a published-size aligner takes ~17 s a job on two cores)")
    p.add_argument("--voices-dir", default=os.environ.get("QWEN_TTS_GATEWAY_VOICES", "~/.cache/qwen-tts-gateway/voices"),
                   help="registered voices are stored here, in a folder per model, and survive restarts; replicas "
                        "share it (on several nodes: a shared mount); '' keeps them in memory only")
    p.add_argument("--max-voices", type=int, default=64,
                   help="registered voices kept, in memory and in --voices-dir alike: registering beyond drops the "
                        "least recently used (at start too)")
    p.add_argument("--voice-map", type=voice_map.parse, default=voice_map.OPENAI_VOICES, metavar="ALIAS=VOICE,...",
                   help="OpenAI voice names for POST /v1/audio/speech, over the default table (docs/protocol.md)")
    limits.add_arguments(p)
    return p


def run(args, argv: list[str]) -> int:
    from ..engine_process import EngineSpec, starts
    from ..fatal import StartupError
    from ..frontends import listening_socket, refuse_taken, share, start_frontends
    from ..server import GatewayServer, create_app, uvicorn_config
    from ..app_state import Gateway, GatewayConfig

    refuse_taken(args.host, args.port)
    if args.replicas:
        from ..replicas.launch import run as run_replicas
        return run_replicas(args, argv)
    cache_dir.use(args.cache_dir)                     # the engine core, spawned below, compiles into it
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
                      max_queue_ms=args.max_queue_ms, aligner=args.aligner, dummy_aligner=args.dummy_aligner,
                      dummy_aligner_times=args.dummy_aligner_times,
                      voices_dir=args.voices_dir or None, max_voices=args.max_voices,
                      kv_cache_dtype=args.kv_cache_dtype, weights_dtype=args.weights_dtype)
    workers = args.workers or max(1, min(4, (os.cpu_count() or 1) // 4))
    config = share(config, workers)
    gateway = Gateway(config, starts.spawn(spec, args.log_level))
    gateway.url = f"http://{f'[{args.host}]' if ':' in args.host else args.host}:{args.port}"
    gateway.frontends = start_frontends(workers - 1, config, gateway.engine.address, args.host, args.port,
                                        args.log_level)
    server = GatewayServer(gateway, uvicorn_config(create_app(gateway), args.host, args.port, gateway, args.log_level))
    try:
        server.run(sockets=[listening_socket(args.host, args.port)])
    except KeyboardInterrupt:               # uvicorn re-raises the captured SIGINT once it has shut down gracefully
        pass
    if gateway.status == "failed":
        raise StartupError(gateway.failure)
    return 0
