"""The process that parses voice registrations: one whose worker died (killed for memory, say) is replaced, so one
lost worker never leaves every later registration failing."""
import asyncio
import base64
import json

import pytest

from gateway.reference_audio import ReferenceDecoder
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
            try:
                await decoder.registration(BODY, 24000)       # the pool may learn of the death with this one
            except Exception:
                pass
            return first, await decoder.registration(BODY, 24000)
        finally:
            decoder.close()
    first, later = asyncio.run(asyncio.wait_for(run(), 120))
    assert first["name"] == later["name"] == "alice" and len(later["audio"]) == 24000
