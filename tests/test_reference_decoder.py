"""Voice registration bodies, parsed in a process of their own: a bad file is a 4xx, and a worker that died (killed for
memory, say) is replaced, so one lost worker never leaves every later registration failing."""
import asyncio
import base64
import json
import struct
from concurrent.futures.process import BrokenProcessPool

import pytest

from engine import EngineInputError
from gateway.reference_audio import ReferenceDecoder, parse_registration
from wav_headers import wav_bytes

BODY = json.dumps({"name": "alice", "text": "Hello there.",
                   "audio": base64.b64encode(wav_bytes(24000, 24000)).decode()}).encode()


def test_a_registration_after_the_decoders_worker_died_is_parsed_by_a_fresh_one():
    async def run():
        decoder = ReferenceDecoder()
        try:
            first = await decoder.registration(BODY, 24000)
            for process in list(decoder.pool._processes.values()):
                process.kill()
                process.join()
            with pytest.raises(BrokenProcessPool):            # the one that finds the worker dead: 'internal; retry'
                await decoder.registration(BODY, 24000)
            return first, await decoder.registration(BODY, 24000)
        finally:
            decoder.close()
    first, later = asyncio.run(asyncio.wait_for(run(), 120))
    assert first["name"] == later["name"] == "alice" and len(later["audio"]) == 24000


def test_a_wav_whose_chunk_runs_past_the_file_is_invalid_audio_not_an_internal_error():
    """The standard library's wave reader raises a bare RuntimeError there: a 500 for the client's bad file."""
    wav = bytearray(wav_bytes(24000, 24000))
    wav[16:20] = struct.pack("<I", 1 << 22)                  # the fmt chunk's size, past the end of the file
    body = json.dumps({"name": "alice", "text": "Hello there.", "audio": base64.b64encode(wav).decode()}).encode()
    with pytest.raises(EngineInputError) as err:
        parse_registration(body, 24000)
    assert err.value.code == "invalid_audio" and "past the end" in str(err.value)
