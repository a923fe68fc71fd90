"""Stand-in for torchaudio (no CPU build exists): qwen_tts imports it only for its 25 Hz tokenizer, unused here."""
