"""Protocol v1 of `GET /v1/tts/websocket`: every message schema, its validation and the binary audio framing."""
from .audio_frames import AUDIO_FRAME_VERSION, pack_audio, unpack_audio
from .codes import (ALIGNMENT_UNAVAILABLE, BUSY, CLOSE_GOING_AWAY, CLOSE_INTERNAL, CLOSE_POLICY, CLOSE_TOO_BIG,
                    CLOSE_TRY_LATER, CONTEXT_ENDED, CONTEXT_TIMEOUT, DUPLICATE_CONTEXT, EMPTY_TEXT, GENERATION_FAILED,
                    INSTRUCT_NOT_SUPPORTED, INTERNAL, INVALID_JSON, INVALID_MESSAGE, INVALID_PARAMETER,
                    INVALID_REQUEST, MESSAGE_TOO_LARGE, MISSING_REFERENCE, NOT_READY, RETRYABLE, SHUTTING_DOWN,
                    SLOW_CONSUMER, TEXT_TOO_LONG, TOO_MANY_CONTEXTS, TOO_MUCH_PENDING_TEXT, UNAUTHORIZED,
                    UNKNOWN_CONTEXT, UNKNOWN_LANGUAGE, UNKNOWN_TYPE, UNKNOWN_VOICE, WORDS_ONLY, WORDS_REFUSED)
from .json_frames import encode, is_unicode, parse_client, parse_server, to_json
from .messages import (ALL_CONTEXTS, CLIENT_MESSAGES, LANGUAGE_CODES, MAX_CONTEXT_ID_BYTES, PROTOCOL_VERSION,
                       SERVER_MESSAGES, TEXT_LAYOUTS, Audio, Cancel, Cancelled, ClientMessage, Done, End, Error, Flush, Flushed,
                       Keepalive, ProtocolError, Ready, ServerMessage, Text, Words, ends_context)
from .stream_format import AUDIO_FORMATS, DEFAULT_SAMPLE_RATE, ENCODINGS, SAMPLE_RATES, StreamFormat
