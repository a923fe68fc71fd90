"""A launched batch's results are read on a thread of their own, so the aligner thread gathers and launches the next
batch while the device still runs this one."""
import queue
import threading
from concurrent.futures import InvalidStateError
from dataclasses import dataclass


@dataclass
class InFlight:
    """A batch whose forward the aligner thread launched, with what its finish records."""
    batch: list
    queued: list[bool]         # each job waited behind other work
    taken: list                # (turn, gflop, slices) of each turn the forward took
    audio_s: float
    started: float             # perf_counter when its launch began
    launched: object           # the aligner's launched forward (an aligner without launch_units: its results)


class Finisher:
    """Runs `finish(flight)` for each flight put, in order, on its own thread; close() returns once every flight put
    is finished (or `timeout` passed); `flying`: those put and not yet finished."""

    def __init__(self, finish):
        self.finish, self.flights, self.flying = finish, queue.Queue(), {}
        self.thread = threading.Thread(target=self._run, name="aligner-finisher", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def put(self, flight: InFlight) -> None:
        self.flying[id(flight)] = flight
        self.flights.put(flight)

    def close(self, timeout: float) -> None:
        if self.thread.is_alive():
            self.flights.put(None)
            self.thread.join(timeout)

    def _run(self) -> None:
        while (flight := self.flights.get()) is not None:
            self.finish(flight)
            self.flying.pop(id(flight), None)


def settle(future, result=None, error: BaseException | None = None) -> None:
    """Resolves `future` unless close() already failed it (a read that outlived close's wait)."""
    try:
        future.set_exception(error) if error is not None else future.set_result(result)
    except InvalidStateError:
        pass
