"""models.py: the MFU denominator of known GPUs, and train.py's defaults as the tools read them."""
import pytest
import torch

import models
from configurator import train_defaults
from conftest import train_script


@pytest.mark.parametrize('name, peak', [('NVIDIA H100 PCIe', 756e12), ('NVIDIA H100 80GB HBM3', 989e12),
                                        ('NVIDIA H100 NVL', 835e12), ('NVIDIA A100-SXM4-80GB', 312e12),
                                        ('NVIDIA H200', 989e12), ('Some Future GPU', None)])
def test_spec_peaks_match_the_card_not_its_family(monkeypatch, name, peak):
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device=None: name)
    assert models.spec_peak_flops('cuda', torch.bfloat16) == peak
    assert models.spec_peak_flops('cuda', torch.float32) is None   # the spec peak is a bf16/fp16 figure


def test_the_tools_read_the_defaults_train_py_runs_with():
    assert train_defaults() == train_script().DEFAULTS
