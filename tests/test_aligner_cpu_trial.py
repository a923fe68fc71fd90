"""Word timestamps on a CPU trial: `serve --dummy-aligner` picks the tiny aligner there (the published size takes
longer than --aligner-timeout a job on a laptop's cores), and it gives words."""
import argparse

import numpy as np
import pytest

from gateway.commands import serve
from gateway.engine_process import EngineSpec

pytestmark = pytest.mark.slow                # `serve` processes


def serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_a_bare_dummy_aligner_flag_means_by_device():
    assert serve_args("--dummy", "tiny", "--dummy-aligner").dummy_aligner == "auto"
    assert serve_args("--dummy", "tiny", "--dummy-aligner", "published").dummy_aligner == "published"


def test_the_auto_dummy_aligner_on_a_cpu_is_tiny_and_aligns():
    engine, service = EngineSpec(dummy="tiny", device="cpu", max_active=2, dummy_aligner="auto").build()
    try:
        assert service.aligner.name == "dummy:tiny"
        audio = (0.1 * np.random.default_rng(0).standard_normal(6 * 24000)).astype(np.float32)
        spans = service.submit(audio, ["a", "trial", "on", "a", "laptop"]).result(120)
        assert len(spans) == 5 and all(0 <= s <= e for s, e in spans)      # (random weights: arbitrary times)
    finally:
        service.close()
        engine.shutdown()
