"""The Qwen3-TTS gateway's client side, without torch: the protocol's schemas (`qwen_tts_client.protocol`, which the
gateway imports too), the framework-free client (`qwen_tts_client.client.GatewayClient`), the LiveKit Agents plugin
(`qwen_tts_client.livekit`, extra `[livekit]`) and the Pipecat service (`qwen_tts_client.pipecat`, extra
`[pipecat]`)."""
__version__ = "0.1.0"
