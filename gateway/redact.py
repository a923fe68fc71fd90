"""Secrets never reach the logs: an `api_key=` query parameter's value (uvicorn logs every path) becomes ***."""
import logging
import re

SECRET = re.compile(r"(\bapi_key=)[^&\s\"']*", re.IGNORECASE)


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


def install(loggers=("uvicorn.access", "uvicorn.error", "qwen_tts_gateway")) -> None:
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
