"""How a front end gets its engine core: a child process it owns, a thread beside a test's engine, or another's."""
import multiprocessing
import tempfile
import threading

from .client import EngineClient
from .io_loop import CoreIOLoop, run_engine_process


def address() -> str:
    return f"ipc://{tempfile.mkdtemp(prefix='qwen-tts-')}/engine"


def spawn(spec, log_level: str = "info") -> EngineClient:
    where = address()
    process = multiprocessing.get_context("spawn").Process(
        target=run_engine_process, args=(spec, where, log_level), name="engine-core", daemon=True)
    return EngineClient(lambda: process.start() or process, where)


def in_thread(engine, aligner=None) -> EngineClient:
    from .spec import warm_up
    where = address()

    def start():
        io_loop = CoreIOLoop(engine, warm_up(engine, aligner), where)
        thread = threading.Thread(target=io_loop.serve, name="engine-core-io", daemon=True)
        thread.start()
        return thread
    return EngineClient(start, where)


def connect(where: str) -> EngineClient:
    return EngineClient(lambda: None, where)
