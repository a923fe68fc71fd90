"""The Ray Serve application of `serve --replicas`: the replicas (a GPU each) and the proxy in front of them."""
import asyncio
import logging
import shlex

from ray import serve
from ray.serve.handle import DeploymentHandle

from ..engine_process.spec import GPU_MAX_STEP_MS
from ..frontends import listening_socket
from .balance import ReplicaTable
from .proxy import HEAD_LIMIT, Proxy
from .replica import GatewayReplica

log = logging.getLogger("qwen_tts_gateway")
POLL_S, MEMBERS_S = 0.25, 1.0
QUIET = {"enable_access_log": False}        # no line per describe() and health check


class GatewayProxy:
    async def __init__(self, replicas: DeploymentHandle, host: str, port: int, wanted: int, max_step_ms: float | None):
        self.replicas, self.proxy = replicas, Proxy(ReplicaTable(wanted, max_step_ms))
        self.server = await asyncio.start_server(self.proxy.serve, sock=listening_socket(host, port), limit=HEAD_LIMIT)
        self.watcher = asyncio.create_task(self.watch())

    async def watch(self) -> None:
        loop, members_due = asyncio.get_running_loop(), 0.0
        while True:
            if loop.time() >= members_due:
                members_due = loop.time() + MEMBERS_S
                try:
                    described = await self.replicas.broadcast("describe").results_async(return_exceptions=True)
                    self.proxy.table.members([d for d in described if isinstance(d, dict)])
                except Exception as exc:          # none running yet (DeploymentUnavailableError): ask again
                    log.info("the replicas cannot be listed yet: %r", exc)
            await asyncio.gather(*(self.proxy.poll(r) for r in list(self.proxy.table.replicas.values())))
            await asyncio.sleep(POLL_S)

    def check_health(self) -> None:
        if self.watcher.done():
            raise RuntimeError(f"the proxy's watcher stopped: {self.watcher.exception()!r}")


def application(unit_args: list[str], replicas: int, gpus: bool, host: str = "0.0.0.0", port: int = 8000,
                proxies: int = 1, max_step_ms: float | None = None, grace_s: float = 10.0) -> serve.Application:
    replica = serve.deployment(GatewayReplica, name="replica", num_replicas=replicas, health_check_period_s=1.0,
                               health_check_timeout_s=10.0, graceful_shutdown_timeout_s=grace_s + 10,
                               ray_actor_options={"num_cpus": 0, "num_gpus": 1 if gpus else 0}, logging_config=QUIET)
    proxy = serve.deployment(GatewayProxy, name="proxy", num_replicas=proxies, health_check_period_s=1.0,
                             ray_actor_options={"num_cpus": 0}, logging_config=QUIET)
    step_ms = max_step_ms if max_step_ms is not None else GPU_MAX_STEP_MS if gpus else None    # each unit's default
    return proxy.bind(replica.bind(unit_args, grace_s), host, port, replicas, step_ms)


def build_app(args: dict) -> serve.Application:
    """For a Serve config: {"serve_args": "--model ...", "replicas": 2, "gpus": true, "port": 8000, "proxies": 1}."""
    return application(shlex.split(args["serve_args"]), int(args.get("replicas", 1)), bool(args.get("gpus", True)),
                       port=int(args.get("port", 8000)), proxies=int(args.get("proxies", 1)))
