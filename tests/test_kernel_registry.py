"""The kernel registry: on the CPU every op is its torch definition; the CUDA choices are made (not run) in one
place, as settings ask, and put back by choosing again."""
import pytest
import torch

from engine.kernels import conv
from engine.kernels.registry import TORCH, KernelSettings, ops, select


def test_the_cpu_gets_the_torch_definitions():
    chosen = select(torch.device("cpu"))
    assert set(chosen.choices.values()) == {"torch"} and not chosen.side_decode
    assert all(getattr(ops, op) is fn for op, fn in TORCH.items())


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
