"""`serve --replicas N`: Ray, Ray Serve without its HTTP proxy, and app.py deployed until SIGINT/SIGTERM."""
import logging
import signal
import threading

OWN_OPTIONS = ("--replicas", "--ray-address", "--proxies", "--host", "--port")    # the units get the rest


def unit_args(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in OWN_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in OWN_OPTIONS)):
            out.append(arg)
    return out


def visible_gpus(device: str | None) -> int:
    if device is not None and not device.startswith("cuda"):
        return 0
    import torch
    return torch.cuda.device_count()


def run(args, argv: list[str]) -> int:
    import ray
    from ray import serve

    from .app import application

    gpus = visible_gpus(args.device)
    replicas = (gpus or 1) if args.replicas == "auto" else int(args.replicas)
    local = args.ray_address is None
    ray.init(address=args.ray_address or "local", include_dashboard=False, logging_level=logging.WARNING,
             **({"object_store_memory": 128 << 20} if local else {}))     # the replicas pass no large objects
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(proxy_location="Disabled")                            # the endpoint is our proxy's
        app = application(unit_args(argv), replicas, gpus > 0, args.host, args.port, args.proxies,
                          args.max_step_ms, args.shutdown_grace)
        serve.run(app, name="qwen-tts-gateway", route_prefix=None)
        logging.getLogger("qwen_tts_gateway").warning(
            "%d replicas serving on http://%s:%d (Ray at %s)", replicas, args.host, args.port,
            ray.get_runtime_context().gcs_address)
        stop.wait()
        serve.delete("qwen-tts-gateway")                                  # each unit drains (SIGINT)
        return 0
    finally:
        if local:
            serve.shutdown()
        ray.shutdown()
