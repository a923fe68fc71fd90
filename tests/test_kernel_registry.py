"""The kernel registry: on the CPU every op is its torch definition; the CUDA choices are made (not run) in one
place, as settings ask, and put back by choosing again."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.kernels import conv, snake
from engine.kernels.registry import TORCH, KernelSettings, ops, select


def test_the_cpu_gets_the_torch_definitions():
    chosen = select(torch.device("cpu"))
    assert set(chosen.choices.values()) == {"torch"} and not chosen.side_decode
    assert all(getattr(ops, op) is fn for op, fn in TORCH.items())


def test_the_engine_imports_and_chooses_where_triton_is_not_installed():
    """A CPU install of torch comes without Triton: every kernel module must import, and the torch code serve."""
    code = ("import sys; sys.modules['triton'] = None\n"
            "import torch, engine.kernels.registry as r\n"
            "assert set(r.select(torch.device('cpu')).choices.values()) == {'torch'}")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]


def test_cuda_choices_follow_the_settings_and_choosing_again_restores_the_ops():
    try:
        full = select(torch.device("cuda"), KernelSettings())
        assert full.side_decode and full.choices["paged_attention"] == "triton"
        assert full.choices["attention_inputs"].startswith("few_row")
        assert all(callable(getattr(ops, op)) for op in TORCH)
        plain = select(torch.device("cuda"), KernelSettings(compile=False, triton=False, side_decode=False))
        assert not plain.side_decode and plain.choices["paged_attention"] == "torch"
        assert plain.choices["write_rows"] == "triton|torch" and plain.choices["rms_norm"] == "torch"
        assert "decode=in line" in plain.describe()
    finally:
        select(torch.device("cpu"))
    assert all(getattr(ops, op) is fn for op, fn in TORCH.items())


def test_the_codec_convolutions_are_chosen_by_one_setting_on_any_device():
    try:
        gemm = select(torch.device("cpu"), KernelSettings(codec_conv="gemm"))
        assert gemm.choices["conv"] == "depthwise|gemm" and gemm.choices["trans_conv"] == "gemm"
        assert ops.conv is not conv.conv_cudnn and ops.trans_conv is conv.trans_conv_matmul
        with pytest.raises(ValueError, match="codec_conv"):
            select(torch.device("cpu"), KernelSettings(codec_conv="winograd"))
    finally:
        select(torch.device("cpu"))
    assert KernelSettings().codec_conv == "cudnn" and ops.conv is conv.conv_cudnn


def test_each_compiled_layer_function_traces_once_for_every_batch_and_width(monkeypatch):
    """The talker's (hidden 2,048) and the predictor's (1,024) layers at a 2,048-token prefill, then at batches: one
    graph a function, and rms_norm's batch of one (dynamo specializes size 1); with sizes that happen to be equal
    tied (torch's default), twice as many graphs, each a trace at every start-up (dynamo's, on the real shapes)."""
    from torch._dynamo.utils import counters
    from torch.fx.experimental import _config as shapes

    from engine.kernels import layer_math
    from engine.kernels.registry import compile_for_every_size

    def graphs() -> int:
        torch._dynamo.reset()
        counters.clear()
        compiled = [torch.compile(f, dynamic=True, backend="eager") for f in (
            layer_math.attention_inputs, layer_math.attention_output_and_mlp, layer_math.rms_norm)]
        attention_inputs, output_and_mlp, rms_norm = compiled
        r = lambda *shape: torch.empty(*shape, device="meta")      # shapes alone: nothing computed
        for n in (2048, 64):
            for hidden, inter in ((2048, 6144), (1024, 3072)):
                x = r(n, hidden)
                attention_inputs(x, r(hidden), r(32 * 128, hidden), 16 * 128, r(128), r(128), r(n, 128), r(n, 128),
                                 1e-6, 128)
                output_and_mlp(x, r(n, 2048), r(hidden, 2048), r(hidden), r(2 * inter, hidden), r(hidden, inter), 1e-6)
                rms_norm(x, r(hidden), 1e-6)
        rms_norm(r(1, 2048), r(2048), 1e-6)
        return counters["stats"]["unique_graphs"]

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", torch._dynamo.config.recompile_limit)
    monkeypatch.setattr(torch._dynamo.config, "accumulated_recompile_limit",
                        torch._dynamo.config.accumulated_recompile_limit)
    monkeypatch.setattr(shapes, "use_duck_shape", True)
    try:
        tied = graphs()
        compile_for_every_size()
        assert (graphs(), tied) == (4, 8)
    finally:
        torch._dynamo.reset()
        counters.clear()                   # engines started later in this process report their own compiles


def test_snakebeta_rows_past_int32_indexing_go_to_the_torch_op():
    meta = dict(device="meta")
    assert snake.fits_snake(torch.empty(2048, 1926, 96, **meta))
    assert not snake.fits_snake(torch.empty(1, 1 << 24, 96, **meta))            # ~11 minutes of audio in one row
    wide = torch.empty(1, 1 << 21, 1024, **meta)[..., :96]                       # a time stride of 1,024
    assert not snake.fits_snake(wide) and snake.fits_snake(torch.empty(1, 1 << 21, 96, **meta))
    assert not snake.fits_snake_after(torch.empty(1, 18, 96, **meta), torch.empty(1, 1 << 24, 96, **meta))
