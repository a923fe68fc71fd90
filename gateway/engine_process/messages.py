"""What crosses between a front end and the engine core besides the requests' own commands (engine.api.commands):
dataclasses, a list of them pickled once per batch (wire.py)."""
import time
from dataclasses import dataclass

import numpy as np

from engine.api.request import AudioChunk, EngineInputError, UnjoinedChunk


@dataclass
class Failure:
    """An exception that crosses the process boundary: input errors keep their code, anything else is internal."""
    message: str
    code: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> "Failure":
        return cls(str(exc), exc.code if isinstance(exc, EngineInputError) else None)

    def exception(self) -> Exception:
        return EngineInputError(self.code, self.message) if self.code else RuntimeError(self.message)


# front end -> core
@dataclass(slots=True)
class Hello:
    pid: int                      # the front end's process: once it is gone, its requests are cancelled


@dataclass(slots=True)
class RegisterVoice:
    key: int
    name: str
    ref: object                   # engine.VoiceRef


@dataclass(slots=True)
class DeleteVoice:
    key: int
    name: str


@dataclass(slots=True)
class Align:
    key: int
    audio: object                 # float32 PCM at the model's rate
    units: list
    due: float | None


@dataclass(slots=True)
class Unalign:
    """The Align of `key` is no longer wanted (its context ended): dropped unless its batch has begun; no answer."""
    key: int


@dataclass(slots=True)
class AdmitWords:
    """Answered with None (a new context gets words) or the reason it gets none."""
    key: int


@dataclass(slots=True)
class Shutdown:
    pass


# core -> front end
@dataclass(slots=True)
class Ready:
    description: dict             # Engine.description() and `aligner`: plain data, no torch
    first_id: int                 # this front end's request ids count from here: unique across front ends


@dataclass(slots=True)
class Chunk:
    id: int
    chunk: AudioChunk | UnjoinedChunk


@dataclass(slots=True)
class Chunks:
    """A batch's chunks as one message: a tuple of plain fields a chunk and every chunk's PCM and codes joined, so a
    step's ~130 chunks pickle under the core's GIL as two arrays, not ~130 objects of two arrays each."""
    heads: list     # (request id, frame offset, sample offset, final, finish reason, sent at, samples, frames)
    pcm: np.ndarray
    codes: np.ndarray             # [frames, codebooks]
    taken_at: float = 0.0         # when the core joined them (the engine thread, once its loop ended)

    @classmethod
    def of(cls, chunks: list) -> "Chunks":
        """Chunk messages of AudioChunks, or of UnjoinedChunks: their frames are joined here, off the engine thread."""
        heads, pcm, codes, width = [], [], [], 0
        for c in chunks:
            a = c.chunk
            if type(a) is UnjoinedChunk:
                frame_codes, frame_pcm = zip(*a.frames)
                codes.extend(frame_codes)
                pcm.extend(frame_pcm)
                samples, frames, width = sum(map(len, frame_pcm)), len(frame_codes), len(frame_codes[0])
            else:
                codes.append(a.codes.ravel())
                pcm.append(a.pcm)
                samples, frames, width = len(a.pcm), len(a.codes), a.codes.shape[1]
            heads.append((c.id, a.frame_offset, a.sample_offset, a.final, a.finish_reason, a.sent_at, samples, frames))
        return cls(heads, np.concatenate(pcm), np.concatenate(codes).reshape(-1, width), time.monotonic())

    @staticmethod
    def gather(messages: list) -> list:
        """`messages` with their Chunks joined into one, where the first of them was."""
        first = next((i for i, m in enumerate(messages) if type(m) is Chunk), None)
        if first is None:
            return messages
        chunks = [m for m in messages[first:] if type(m) is Chunk]
        return [*messages[:first], Chunks.of(chunks), *(m for m in messages[first:] if type(m) is not Chunk)]

    def unpack(self) -> list[Chunk]:
        """Each chunk's arrays are copies: a view would hold the whole batch while a slow reader holds the chunk."""
        unpacked, sample, frame = [], 0, 0
        for request_id, frame_offset, sample_offset, final, reason, sent_at, samples, frames in self.heads:
            pcm, codes = self.pcm[sample:sample + samples].copy(), self.codes[frame:frame + frames].copy()
            unpacked.append(Chunk(request_id, AudioChunk(pcm, codes, frame_offset, sample_offset, final, reason,
                                                         sent_at)))
            sample, frame = sample + samples, frame + frames
        return unpacked


@dataclass(slots=True)
class Failed:
    id: int
    failure: Failure


@dataclass(slots=True)
class Answer:
    """To a RegisterVoice (the name), a DeleteVoice (whether it was there) or an Align (the words' times)."""
    key: int
    result: object                # or a Failure


@dataclass(slots=True)
class Stats:
    stats: dict


@dataclass(slots=True)
class VoiceList:
    names: list[str]
