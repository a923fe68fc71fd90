"""What the WebSocket tests share: reading and sending protocol messages, and waiting for the server to be idle."""
import asyncio
import time

from qwen_tts_client import protocol as p

TERMINAL = (p.Done, p.Cancelled, p.Error)


async def recv(ws, timeout: float = 30.0):
    return p.parse_server(await asyncio.wait_for(ws.recv(), timeout))


async def send(ws, *messages) -> None:
    for msg in messages:
        await ws.send(p.encode(msg))


async def collect(ws, ids, log=None) -> dict[str, list]:
    """Every message per context until each of `ids` got its last one; `log` gets all messages in order."""
    by_id, log = {i: [] for i in ids}, [] if log is None else log
    while not all(by_id[i] and isinstance(by_id[i][-1], TERMINAL) for i in ids):
        msg = await recv(ws)
        log.append(msg)
        by_id.setdefault(msg.context_id, []).append(msg)
    return by_id


def wait_idle(srv, timeout: float = 5.0) -> float:
    """Seconds until the engine, contexts and sockets are all empty."""
    t0, gw = time.monotonic(), srv.gateway
    while srv.engine.num_active or gw.open_contexts or gw.sessions:
        assert time.monotonic() - t0 < timeout, (srv.engine.num_active, gw.open_contexts)
        time.sleep(0.005)
    return time.monotonic() - t0
