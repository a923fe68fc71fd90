import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "integrations")]      # this checkout's gateway and client
sys.path.append(str(Path(__file__).parent / "stubs"))   # torchaudio stand-in for importing qwen_tts
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
