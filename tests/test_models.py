"""models.py: the MFU denominator of known GPUs; configurator.defaults_of: a script's settings, as train.py and the tools take theirs."""
import pytest
import torch

import configurator
import models


@pytest.mark.parametrize('name, peak', [('NVIDIA H100 PCIe', 756e12), ('NVIDIA H100 80GB HBM3', 989e12),
                                        ('NVIDIA H100 NVL', 835e12), ('NVIDIA A100-SXM4-80GB', 312e12),
                                        ('NVIDIA H200', 989e12), ('Some Future GPU', None)])
def test_spec_peaks_match_the_card_not_its_family(monkeypatch, name, peak):
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device=None: name)
    assert models.spec_peak_flops('cuda', torch.bfloat16) == peak
    assert models.spec_peak_flops('cuda', torch.float32) is None   # the spec peak is a bf16/fp16 figure


def test_defaults_are_a_scripts_settings_alone():
    ns = {'__name__': 'x', '_private': 1, 'ROOT': '/r', 'os': configurator.os, 'fail': configurator.fail,
          'ConfigError': configurator.ConfigError, 'cfg': {}, 'lr': 1e-3, 'n_layer': 4, 'compile': None,
          'name': 'gpt', 'flag': False, 'windows': (8, 32)}
    assert configurator.defaults_of(ns) == {'lr': 1e-3, 'n_layer': 4, 'compile': None, 'name': 'gpt', 'flag': False,
                                            'windows': (8, 32)}
