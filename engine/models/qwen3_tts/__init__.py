"""Qwen3-TTS-12Hz."""
