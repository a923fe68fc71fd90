"""`qwen-tts-gateway synth`: one utterance to a WAV file."""
import sys
import time

from .. import cache_dir
from . import DefaultsShown, add_model_args


def add_parser(sub):
    p = sub.add_parser("synth", help="synthesize one utterance to a WAV file", formatter_class=DefaultsShown)
    add_model_args(p)
    p.add_argument("--text", required=True, help="what to say")
    p.add_argument("--voice", help="CustomVoice speaker (default: the model's first) or a registered voice")
    p.add_argument("--instruct", help="style instruction (CustomVoice 1.7B) or voice description (VoiceDesign)")
    p.add_argument("--language", default="auto", help="english, chinese, ... (auto: the model decides)")
    p.add_argument("--ref-audio", help="reference WAV for voice cloning (Base)")
    p.add_argument("--ref-text", help="transcript of the reference audio (ICL clone)")
    p.add_argument("--x-vector-only", action="store_true", help="clone from the speaker embedding alone")
    p.add_argument("--greedy", action="store_true", help="no sampling (talker and code predictor)")
    p.add_argument("--seed", type=int, help="sampling seed (default: random)")
    p.add_argument("--max-frames", type=int, help="at most this many 80 ms frames (default: by text length)")
    p.add_argument("--ignore-eos", action="store_true", help="generate all of --max-frames")
    layout = p.add_mutually_exclusive_group()   # neither: the layout the official code defaults to for the variant
    layout.add_argument("--streaming-text", dest="non_streaming_text", action="store_false", default=None,
                        help="text fed one token a frame, as a streamed context (a clone's default)")
    layout.add_argument("--non-streaming-text", dest="non_streaming_text", action="store_true",
                        help="whole text in the prompt (CustomVoice's and VoiceDesign's default)")
    p.add_argument("--out", required=True, help="output WAV (24 kHz mono, 16-bit)")
    p.add_argument("--codes-out", help="write the generated codec frames as an int array (frames, 16) .npy")
    return p


def run(args) -> int:
    import numpy as np

    cache_dir.use(args.cache_dir)
    from engine import Engine, SamplingParams, SynthesisRequest, VoiceRef
    from engine.api.wav import read_wav, write_wav

    t0 = time.perf_counter()
    engine = Engine.load(model=args.model, dummy=args.dummy, device=args.device, dtype=args.dtype,
                         max_active=1).start()                  # one utterance: one stream's cache and state
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
    rate = engine.info["sample_rate"]
    write_wav(args.out, pcm, rate)
    if args.codes_out:
        np.save(args.codes_out, codes.astype(np.int64))
    seconds = len(pcm) / rate
    print(f"{codes.shape[0]} frames, {seconds:.2f}s audio in {elapsed:.2f}s (RTF {elapsed / max(seconds, 1e-9):.3f}), "
          f"finish: {chunks[-1].finish_reason}", file=sys.stderr)
    return 0
