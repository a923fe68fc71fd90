"""The encoders without a server: OpenAI's response formats (streamed and whole), the speed change, the WebSocket's
Opus packets and A-law, and the OpenAI voice table."""
import io

import av
import numpy as np
import pytest

from gateway.audio import AudioEncoder
from gateway.containers import FORMATS, ContainerEncoder
from gateway.tempo import TimeStretch
from gateway.voice_map import OPENAI_VOICES, parse, resolve

RATE = 24000
CHUNKS = (1920, 3840, 7680, 15360, 30720, 12480)         # the engine's schedule, then a last piece: 3 s


def tone(seconds: float, hz: float = 440.0, rate: int = RATE) -> np.ndarray:
    return (0.3 * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def chunked(encode, pcm: np.ndarray) -> list:
    bounds = np.cumsum((0,) + CHUNKS)
    return [encode(pcm[a:b], b == bounds[-1]) for a, b in zip(bounds[:-1], bounds[1:])]


def decode(data: bytes, fmt: str) -> tuple[np.ndarray, int]:
    if fmt == "pcm":
        return np.frombuffer(data, "<i2") / 32768, RATE
    with av.open(io.BytesIO(data)) as container:
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        return np.concatenate(frames), container.streams.audio[0].sample_rate


def peak_hz(x: np.ndarray, rate: int) -> float:
    return np.argmax(np.abs(np.fft.rfft(x))) * rate / len(x)


@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_format_decodes_back_to_the_audio(fmt, streamed):
    x = tone(3.0)
    encoder = ContainerEncoder(fmt, streamed)
    pieces = chunked(encoder.encode, x)
    assert bool(pieces[0] or pieces[1]) == streamed and (streamed or all(not p for p in pieces[:-1]))
    data = b"".join(pieces)
    y, rate = decode(data, fmt)
    assert abs(len(y) / rate - 3.0) <= 2048 / RATE            # codec delay and padding: at most a 2048-sample frame
    assert abs(peak_hz(y, rate) - 440) < 2
    if fmt == "wav":       # streamed: the sizes FFmpeg writes to a pipe; whole: exact
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if streamed else (len(data) - 8, len(x) * 2)
        assert (int.from_bytes(data[4:8], "little"), int.from_bytes(data[40:44], "little")) == sizes
    if fmt == "flac":      # STREAMINFO's sample count: 0 (unknown) streamed, exact whole
        assert int.from_bytes(data[18:26], "big") & (1 << 36) - 1 == (0 if streamed else len(x))


@pytest.mark.parametrize("speed", [0.25, 0.5, 2.0, 4.0])
def test_speed_changes_the_duration_and_keeps_the_pitch(speed):
    stretch = TimeStretch(speed, RATE)
    pieces = chunked(stretch.push, tone(3.0))
    y = np.concatenate(pieces)
    assert abs(len(y) - 3.0 * RATE / speed) <= 0.02 * len(y) + 480
    assert len(pieces[0]) or speed == 4.0                     # the first chunk's audio comes with it
    assert abs(peak_hz(y, RATE) - 440) < 2


@pytest.mark.parametrize("rate", [24000, 16000, 8000])
def test_opus_messages_are_one_20ms_packet_each_and_decode_back(rate):
    x = tone(3.0)
    messages = [m for ms in chunked(AudioEncoder(rate, "opus").encode, x) for m in ms]
    assert {samples for _, samples in messages} == {rate // 50}
    assert 3.0 * rate <= len(messages) * rate // 50 <= 3.0 * rate + 2 * rate // 50   # lookahead, then a padded packet
    decoder = av.CodecContext.create("libopus", "r")
    decoder.sample_rate, decoder.layout = 48000, "mono"
    frames = [f for data, _ in messages for f in decoder.decode(av.Packet(data))]
    assert [f.samples for f in frames] == [960] * len(messages)           # a 20 ms frame per packet
    y = np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.float32) / 32768
    assert abs(peak_hz(y, 48000) - 440) < 2 and 0.15 < np.sqrt(np.mean(y ** 2)) < 0.3


def g711_alaw_to_linear(codes: np.ndarray) -> np.ndarray:
    """ITU-T G.711 A-law decoding, written out: the reference for FFmpeg's encoder."""
    a = codes.astype(np.int32) ^ 0x55
    segment, mantissa = (a >> 4) & 7, a & 0x0F
    magnitude = np.where(segment == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(segment - 1, 0))
    return np.where(a & 0x80, magnitude, -magnitude)


def test_alaw_is_g711():
    levels = g711_alaw_to_linear(np.arange(256))
    [(data, samples)] = AudioEncoder(RATE, "alaw").encode((levels / 32768).astype(np.float32), final=True)
    assert samples == 256 and list(data) == list(range(256))        # every A-law level encodes to its own code
    x = np.linspace(-1, 1, 8001).astype(np.float32)
    [(data, _)] = AudioEncoder(RATE, "alaw").encode(x, final=True)
    error = g711_alaw_to_linear(np.frombuffer(data, np.uint8)) - np.clip(np.round(x * 32768), -32768, 32767)
    assert np.abs(error).max() <= 512                              # half of the largest A-law step
    [(data, samples)] = AudioEncoder(8000, "alaw").encode(tone(0.3), final=True)
    assert len(data) == samples == 2400


def test_openai_voice_names():
    speakers = ["serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric", "dylan"]
    assert all(resolve(name, OPENAI_VOICES, speakers, True) in speakers for name in OPENAI_VOICES)
    table = parse("alloy=Ryan, nova=my_clone")
    assert (table["alloy"], table["nova"], table["echo"]) == ("Ryan", "my_clone", OPENAI_VOICES["echo"])
    assert resolve("Alloy", table, speakers, True) == "Ryan" and resolve("nova", table, speakers, True) == "nova"
    assert resolve("nova", table, speakers + ["my_clone"], True) == "my_clone"
    assert resolve("ryan", table, speakers, True) == "ryan" and resolve("nobody", table, speakers, True) == "nobody"
    assert resolve("alloy", table, ["alloy"], True) == "alloy"          # a registered voice of that name comes first
    assert resolve("alloy", table, [], False) is None                  # VoiceDesign: `instructions` is the voice
    with pytest.raises(Exception, match="ALIAS=VOICE"):
        parse("alloy")
