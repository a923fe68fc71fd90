"""Qwen3-TTS-12Hz."""

VARIANTS = ("0.6B-Base", "0.6B-CustomVoice", "1.7B-Base", "1.7B-CustomVoice", "1.7B-VoiceDesign")
