"""Pitch-preserving speed change of a stream, chunk by chunk: FFmpeg's atempo filter through PyAV."""
from fractions import Fraction

import av
import numpy as np

from .codecs import audio_frame

MIN_SPEED, MAX_SPEED = 0.25, 4.0        # OpenAI's range for `speed`
ATEMPO_MIN = 0.5                        # one atempo filter goes down to half speed: slower ones chain two
PIECE = 480                             # 20 ms frames in: atempo gives a chunk's audio before the next chunk comes


class TimeStretch:
    def __init__(self, speed: float, rate: int):
        self.graph, self.rate, self.pts = av.filter.Graph(), rate, 0
        factors = [speed ** 0.5] * 2 if speed < ATEMPO_MIN else [speed]
        source = self.graph.add_abuffer(format="flt", sample_rate=rate, layout="mono", time_base=Fraction(1, rate))
        tempos = [self.graph.add("atempo", repr(factor)) for factor in factors]
        self.graph.link_nodes(source, *tempos, self.graph.add("abuffersink")).configure()

    def push(self, pcm: np.ndarray, final: bool = False) -> np.ndarray:
        for start in range(0, len(pcm), PIECE):
            self.graph.push(audio_frame(pcm[start:start + PIECE], self.rate, self.pts + start))
        self.pts += len(pcm)
        if final:
            self.graph.push(None)
        out = []
        while True:
            try:
                out.append(self.graph.pull().to_ndarray()[0])
            except (BlockingIOError, EOFError):       # nothing more until the next chunk; or the end
                return np.concatenate(out) if out else np.zeros(0, np.float32)
