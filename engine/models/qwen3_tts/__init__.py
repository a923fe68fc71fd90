"""Qwen3-TTS-12Hz."""

SAMPLE_RATE = 24000            # the speech tokenizer's output_sample_rate: read here by front ends, without torch
SAMPLES_PER_FRAME = 1920       # its decode_upsample_rate: 12.5 frames a second

VARIANTS = ("0.6B-Base", "0.6B-CustomVoice", "1.7B-Base", "1.7B-CustomVoice", "1.7B-VoiceDesign")
