"""What reaches the logs: secrets never (an `api_key=` query value becomes ***), probes not (GET /health, /metrics)."""
import logging
import re

SECRET = re.compile(r"(\bapi_key=)[^&\s\"']*", re.IGNORECASE)
PROBES = ("/health", "/metrics")


def redact(value):
    return SECRET.sub(r"\1***", value) if isinstance(value, str) else value


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: redact(arg) for key, arg in record.args.items()}
        return True


class QuietProbes(logging.Filter):
    """A load balancer's or the replicas' proxy's polls, several a second, would drown the requests' lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (len(args) >= 3 and args[1] == "GET" and str(args[2]).split("?")[0] in PROBES)


def install() -> None:
    for name in ("uvicorn.access", "uvicorn.error", "qwen_tts_gateway"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QuietProbes) for f in access.filters):
        access.addFilter(QuietProbes())
