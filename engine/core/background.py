"""Work beside the streams (voice registrations): one job at a time on a thread of its own, at the lowest priority
(CPU: nice 19, its intra-op threads too; CUDA: a low-priority stream), from a bounded queue that answers `busy`.
While streams play, a job is paced after each layer it runs so that it takes at most SHARE of the device."""
import contextlib
import os
import queue
import sys
import threading
import time
from concurrent.futures import Future

import torch

from engine.api.request import EngineInputError

LOWEST_NICE = 19
SHARE = 0.1     # a priority stream still shares the SMs: kernels beside a step slow it about as long as they run


class Background:
    def __init__(self, device: torch.device, max_waiting: int = 4, busy=lambda: False, share: float = SHARE):
        self.device, self.max_waiting, self.busy, self.share = device, max_waiting, busy, share
        self.jobs: queue.Queue = queue.Queue(max_waiting)
        self._stop = False
        self._thread: threading.Thread | None = None
        self._since = 0.0

    def pace(self, modules) -> None:
        """After each innermost layer of `modules` that runs on this thread."""
        for module in filter(None, modules):
            for layer in module.modules():
                if next(layer.children(), None) is None:
                    layer.register_forward_hook(self._yield)

    def _yield(self, *_) -> None:
        if threading.current_thread() is not self._thread:
            return
        if self.busy():
            if self.device.type == "cuda":
                torch.cuda.current_stream().synchronize()
            time.sleep((time.perf_counter() - self._since) * (1 - self.share) / self.share)
        self._since = time.perf_counter()

    def start(self) -> "Background":
        self._thread = threading.Thread(target=self._run, name="tts-background", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        with contextlib.suppress(queue.Full):       # wakes the thread now; a full queue keeps it busy anyway
            self.jobs.put_nowait(None)
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
            job = self.jobs.get()
            if job is None:
                continue
            future, fn, args = job
            if not future.set_running_or_notify_cancel():      # the caller gave up
                continue
            self._since = time.perf_counter()
            try:
                result = fn(*args)
            except Exception as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
