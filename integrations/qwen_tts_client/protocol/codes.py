"""Error codes of `error` messages, and the WebSocket close codes of connection errors."""

# the engine's EngineInputError codes (second group) pass through unchanged
INVALID_JSON, UNKNOWN_TYPE, INVALID_MESSAGE, MESSAGE_TOO_LARGE = "invalid_json", "unknown_type", "invalid_message", \
    "message_too_large"
UNKNOWN_CONTEXT, DUPLICATE_CONTEXT, CONTEXT_ENDED = "unknown_context", "duplicate_context", "context_ended"
TOO_MANY_CONTEXTS, CONTEXT_TIMEOUT, BUSY, INTERNAL = "too_many_contexts", "context_timeout", "busy", "internal"
UNAUTHORIZED, INVALID_PARAMETER, NOT_READY, SHUTTING_DOWN = "unauthorized", "invalid_parameter", "not_ready", \
    "shutting_down"
UNKNOWN_VOICE, UNKNOWN_LANGUAGE, EMPTY_TEXT, MISSING_REFERENCE = "unknown_voice", "unknown_language", "empty_text", \
    "missing_reference"
INSTRUCT_NOT_SUPPORTED, TEXT_TOO_LONG, INVALID_REQUEST = "instruct_not_supported", "text_too_long", "invalid_request"
GENERATION_FAILED = "generation_failed"              # this request made the engine fail; the others went on
TOO_MUCH_PENDING_TEXT, SLOW_CONSUMER = "too_much_pending_text", "slow_consumer"
ALIGNMENT_UNAVAILABLE = "alignment_unavailable"      # word timestamps stopped (failed or timed out)
WORDS_REFUSED = "words_refused"                      # no word timestamps for this context: the device is full
WORDS_ONLY = frozenset({ALIGNMENT_UNAVAILABLE, WORDS_REFUSED})   # the errors that do not end their context
RETRYABLE = frozenset({BUSY, INTERNAL, NOT_READY, SHUTTING_DOWN})

CLOSE_GOING_AWAY, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_INTERNAL, CLOSE_TRY_LATER = 1001, 1008, 1009, 1011, 1013
