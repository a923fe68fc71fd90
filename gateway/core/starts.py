"""How a front end gets its engine core: a child process it owns (serve), a thread beside a test's engine, or the
core another front end of the same server started."""
import multiprocessing
import tempfile
import threading

from .client import EngineClient
from .worker import EngineWorker, run_engine_process


def address() -> str:
    return f"ipc://{tempfile.mkdtemp(prefix='qwen-tts-')}/engine"


def spawn(spec, log_level: str = "info") -> EngineClient:
    where = address()
    process = multiprocessing.get_context("spawn").Process(
        target=run_engine_process, args=(spec, where, log_level), name="engine-core", daemon=True)
    return EngineClient(lambda: process.start() or process, where)


def in_thread(engine, aligner=None) -> EngineClient:
    """A test's engine (and aligner) served by a thread of this process, over the same socket and messages."""
    from .spec import warm_up
    where = address()

    def start():
        worker = EngineWorker(engine, warm_up(engine, aligner), where)
        thread = threading.Thread(target=worker.serve, name="engine-core-io", daemon=True)
        thread.start()
        return thread
    return EngineClient(start, where)


def connect(where: str) -> EngineClient:
    return EngineClient(lambda: None, where)
