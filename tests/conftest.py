import gc
import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "integrations")]      # this checkout's gateway and client
sys.path.append(str(Path(__file__).parent / "stubs"))   # torchaudio stand-in for importing qwen_tts
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def engine():
    """One started tiny engine (8 streams) for the files that only submit to it and restore what they patch; a file
    may define its own. A gateway's engine is its own: the engine core serving it shuts it down with the gateway."""
    from engine import Engine
    engine = Engine.load(dummy="tiny", device="cpu", max_active=8).start()
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def words_server():
    """One gateway with word timestamps from the stand-in aligner (tests/stand_in_aligner.py), for the files that
    speak to it and restore what they change."""
    from stand_in_aligner import StandIn
    from test_aligner_gateway import start_server
    srv = start_server(StandIn())
    yield srv
    srv.stop()


def pytest_configure(config):
    if "not slow" in (config.option.markexpr or ""):
        settings.register_profile("inner", max_examples=25)             # helpers.examples: a quarter of each count
        settings.load_profile("inner")


def pytest_ignore_collect(collection_path, config):
    """`-m "not slow"` does not import the files that are slow as a whole (qwen-asr alone takes 15 s to import)."""
    if collection_path.suffix == ".py" and "not slow" in (config.option.markexpr or ""):
        return "\npytestmark = pytest.mark.slow" in collection_path.read_text() or None


def pytest_collection_finish(session):
    """What collection imported (torch, transformers, the tokenizers: a million objects) lives to the end: frozen, no
    full collection walks it again (0.4 s each: the first Engine's, pytest's five at exit where no Engine froze it)."""
    gc.freeze()
