"""Qwen3-TTS-12Hz: configs, weights, prompt layouts, voices, the talker, predictor, codec and their stages."""
