"""Agent-framework integrations of the gateway: `integrations.livekit` (extra `[livekit]`) and `integrations.pipecat`
(extra `[pipecat]`), both built on the framework-free protocol client `integrations.client`."""
