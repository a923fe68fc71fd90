"""An engine core whose engine thread has stopped fails at once (its requests would never end), saying why in one
line for the front end, instead of serving stats while every stream hangs."""
import threading
from types import SimpleNamespace

from gateway.engine_process import starts
from gateway.engine_process.io_loop import CoreIOLoop


def test_the_core_stops_serving_once_its_engine_thread_is_gone():
    engine = SimpleNamespace(is_alive=lambda: False, shutdown=lambda: None,
                             stats=lambda: {}, voice_names=lambda: [], on_delivered=lambda callback: None)
    worker = CoreIOLoop(engine, None, starts.address())
    serving = threading.Thread(target=worker.serve, daemon=True)
    serving.start()
    serving.join(10)
    assert not serving.is_alive() and "engine thread stopped" in worker.failure
