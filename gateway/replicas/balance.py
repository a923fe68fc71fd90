"""Which replica takes a new socket or request: the least loaded that can, from its last /metrics poll."""
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

FRAME_MS = 80.0            # a step gives every running stream its next 80 ms frame


@dataclass
class Replica:
    name: str
    url: str
    pid: int                          # its unit's process
    ready: bool = False
    info: dict | None = None          # its /health: the model's description
    streams: float = 0.0              # engine streams admitted (tts_generating_requests)
    max_active: float = math.inf      # the engine's slots, or fewer by its step line (tts_max_active, ..._capacity_..)
    step_ms: float = 0.0              # the engine step's moving average (tts_engine_step_ms)
    connections: int = 0              # sockets and requests this proxy relays to it now

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname, parts.port

    def full(self, max_step_ms: float | None) -> bool:
        """Every slot taken, or a step slower than --max-step-ms: a new stream would only get `busy`."""
        return self.streams >= self.max_active or max_step_ms is not None and self.step_ms > max_step_ms

    @property
    def load(self) -> float:
        return (self.streams + self.connections + 1) * (1 + self.step_ms / FRAME_MS)


class ReplicaTable:
    def __init__(self, wanted: int, max_step_ms: float | None = None):
        self.wanted, self.max_step_ms = wanted, max_step_ms
        self.replicas: dict[str, Replica] = {}     # by url: a replaced replica comes back on another port
        self.started = False                       # every wanted replica was ready once

    def members(self, described: list[dict]) -> None:
        urls = {d["url"]: d for d in described}
        for url in set(self.replicas) - set(urls):
            del self.replicas[url]
        for url, d in urls.items():
            self.replicas.setdefault(url, Replica(d["name"], url, d["pid"]))

    def polled(self, replica: Replica, gauges: dict[str, float] | None) -> None:
        replica.ready = gauges is not None and replica.info is not None
        if replica.ready:
            replica.streams = gauges.get("tts_generating_requests", 0.0)
            replica.max_active = min(gauges.get("tts_max_active", 0.0) or math.inf,          # the step line's too
                                     gauges.get("tts_engine_step_capacity_streams", 0.0) or math.inf)
            replica.step_ms = gauges.get("tts_engine_step_ms", 0.0)
        self.started |= len(self.ready()) >= self.wanted

    def ready(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.ready]

    def choose(self) -> Replica | None:
        room = [r for r in self.ready() if not r.full(self.max_step_ms)]
        return min(room, key=lambda r: r.load, default=None)
