"""Work beside the streams (voice registrations): one job at a time on a thread of its own, at the lowest priority
(CPU: nice 19, its intra-op threads too; CUDA: a low-priority stream), from a bounded queue that answers `busy`."""
import os
import queue
import sys
import threading
from concurrent.futures import Future

import torch

from engine.api.request import EngineInputError

LOWEST_NICE = 19


class Background:
    def __init__(self, device: torch.device, max_waiting: int = 4):
        self.device, self.max_waiting = device, max_waiting
        self.jobs: queue.Queue = queue.Queue(max_waiting)
        self._stop = False
        self._thread: threading.Thread | None = None

    def start(self) -> "Background":
        self._thread = threading.Thread(target=self._run, name="tts-background", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        if self._thread:
            self._thread.join(timeout=10)

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        try:
            self.jobs.put_nowait((future, fn, args))
        except queue.Full:
            raise EngineInputError("busy", f"{self.max_waiting} voice registrations are waiting; retry shortly") \
                from None
        return future

    def _run(self) -> None:
        if sys.platform == "linux":     # this thread only; the OpenMP threads it starts inherit it
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_NICE)
        if self.device.type == "cuda":
            torch.cuda.set_stream(torch.cuda.Stream(self.device, priority=0))     # the engine's is the highest
        while not self._stop:
            try:
                future, fn, args = self.jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if not future.set_running_or_notify_cancel():      # the caller gave up
                continue
            try:
                result = fn(*args)
            except Exception as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
