"""pretrained.py's releases (hf:OWNER/NAME or a folder as the authors' from_pretrained reads one)
and tools.lambada, through the fixture of tests/fixtures/parcae_authors/: a release folder reaches
their logits, sample.py generates from it with their tokenizer, the hub path asks for their files
in their order (served from the fixture: nothing is downloaded), a missing package is one line,
and LAMBADA's scoring equals a naive per-passage loop and a case worked out by hand (tools.eval
--task=lambada scores a release as tools.lambada does); prepare_data.py lambada: test_lambada.py."""
import json
import os
import shutil
import sys

import pytest
import torch
import torch.nn.functional as F

import pretrained
import run_folder
import sample
from configurator import ConfigError
from parcae import parcae_reference
from test_parcae_authors import FIXTURE, load, tolerance
from tools import lambada

tokenizers = pytest.importorskip('tokenizers', reason="the authors' tokenizer.json needs the tokenizers package")


def release_folder(root, name='released', weights='pytorch_model.bin', state_dict=None):
    """A folder of the authors' format: config.json, the state dict under `weights`, tokenizer.json."""
    folder = os.path.join(str(root), name)
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(FIXTURE, name, 'config.json'), folder)
    shutil.copy(os.path.join(FIXTURE, 'tokenizer.json'), folder)
    torch.save(state_dict if state_dict is not None else load(name)[1], os.path.join(folder, weights))
    return folder


@pytest.mark.parametrize('weights', ['pytorch_model.bin', 'model.pt'])
def test_a_release_folder_gives_their_logits(tmp_path, weights):
    model, ckpt = run_folder.load_checkpoint(release_folder(tmp_path, weights=weights))
    _, _, expected = load('released')
    T = 2
    want = expected[f'logits_{T}']
    with torch.no_grad():
        got = parcae_reference(model.eval(), expected['idx'], T, h0=expected[f'h0_{T}'])
    assert (got - want).abs().max().item() < tolerance(model, T, want.abs().max().item())
    assert ckpt['model_name'] == 'parcae' and ckpt['meta']['tokenizer_file'].endswith('tokenizer.json')


def test_a_folder_without_weights_is_one_line(tmp_path):
    folder = release_folder(tmp_path)
    os.remove(os.path.join(folder, 'pytorch_model.bin'))
    with pytest.raises(ConfigError, match='pytorch_model.bin or model.pt'):
        run_folder.load_checkpoint(folder)


def test_sample_generates_from_a_release_folder_with_their_tokenizer(tmp_path, capsys):
    folder = release_folder(tmp_path)
    sample.main([f'--init_from={folder}', '--start=the loop', '--max_new_tokens=12', '--temperature=0',
                 '--num_recur=2'])
    out = capsys.readouterr()
    model, ckpt = run_folder.load_checkpoint(folder)
    encode, decode, _ = pretrained.tokenizer(ckpt['meta'])
    idx = torch.tensor([encode('the loop')])
    with torch.no_grad():   # greedy by full forwards, not sample.py's cached decode
        for _ in range(12):
            idx = torch.cat([idx, model.eval()(idx, num_recur=2)[0][:, -1:].argmax(-1)], 1)
    assert out.out.split('\n---------------')[0] == decode(idx[0].tolist())
    assert 'tokenizer.json' in out.err


def test_the_hub_path_asks_for_their_files_in_their_order(tmp_path, monkeypatch):
    hub = pytest.importorskip('huggingface_hub')
    served = release_folder(tmp_path, weights='model.pt')
    asked = []

    def download(repo_id, filename):   # their from_pretrained: config.json, then the first weights file found
        asked.append((repo_id, filename))
        if not os.path.isfile(os.path.join(served, filename)):
            raise FileNotFoundError(filename)
        return os.path.join(served, filename)
    monkeypatch.setattr(hub, 'hf_hub_download', download)
    model, ckpt = run_folder.load_checkpoint('hf:SandyResearch/parcae-tiny')
    assert [f for _, f in asked] == ['config.json', 'pytorch_model.bin', 'model.pt', 'tokenizer.json',
                                     'tokenizer_config.json']
    assert {r for r, _ in asked} == {'SandyResearch/parcae-tiny'}
    folder_model, _ = run_folder.load_checkpoint(served)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), folder_model.state_dict().values()))
    assert ckpt['release'] == 'hf:SandyResearch/parcae-tiny'


def test_hf_without_huggingface_hub_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'huggingface_hub', None)   # import huggingface_hub raises ImportError
    with pytest.raises(SystemExit) as e:
        sample.main(['--init_from=hf:SandyResearch/parcae-140m'])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: hf:SandyResearch/parcae-140m needs the huggingface_hub package: pip install huggingface_hub"]


def test_their_tokenizer_round_trips_and_a_missing_package_is_one_line(monkeypatch, tmp_path):
    meta = {'tokenizer_file': os.path.join(FIXTURE, 'tokenizer.json'), 'bos_token': 'Ġ'}
    encode, decode, bos_id = pretrained.tokenizer(meta)
    text = "the loop runs the same block again; a stable loop forgets where it started."
    ids = encode(text)
    assert decode(ids) == text and len(ids) < len(text) and max(ids) < 64   # merges used, in the model's vocabulary
    assert bos_id == 23   # the bos_token's id in the vocabulary
    monkeypatch.setitem(sys.modules, 'tokenizers', None)
    with pytest.raises(ValueError, match='pip install tokenizers'):
        pretrained.tokenizer(meta)


# ----------------------------------------------------------------------------- LAMBADA
def naive(model, encoded, knobs):
    """Per passage, per word token: one forward over the text before it."""
    out = []
    with torch.no_grad():
        for ids, k in encoded:
            greedy, lp = True, 0.0
            for j in range(len(ids) - k, len(ids)):
                logp = F.log_softmax(model(torch.tensor([ids[:j]]), **knobs)[0][0, -1].float(), -1)
                greedy &= logp.argmax().item() == ids[j]
                lp += logp[ids[j]].item()
            out.append((greedy, lp))
    return out


def test_lambada_scoring_equals_a_naive_loop(tmp_path):
    path = tmp_path / 'passages.jsonl'
    rows = [{'text': 'the loop runs the same block again'}, {'context': 'a stable loop forgets where it',
                                                             'continuation': 'started'}, {'text': 'the loop runs'}]
    path.write_text('\n'.join(json.dumps(r) for r in rows) + '\n')
    items = lambada.read_passages(str(path))
    assert items[1] == ('a stable loop forgets where it', ' started') and items[2] == ('the loop', ' runs')
    model, ckpt = run_folder.load_checkpoint(release_folder(tmp_path))
    encode, _, _ = pretrained.tokenizer(ckpt['meta'])
    encoded = lambada.encode_passages(items, encode, None, model.config.block_size)
    assert encoded[2] == (encode('the loop runs'), len(encode('the loop runs')) - len(encode('the loop')))
    model.eval()
    got = lambada.score(model, encoded, {'num_recur': 2}, 2, 'cpu')   # batches of 2: padded rows too
    want = naive(model, encoded, {'num_recur': 2})
    tol = tolerance(model, 2, 100.0)   # log-softmax of logits well under 100 in size, summed over <= 3 tokens
    assert [g for g, _ in got] == [g for g, _ in want]
    assert all(abs(a - b) < 3 * 2 * tol for (_, a), (_, b) in zip(got, want))


def test_lambada_on_a_uniform_model_scores_as_worked_out(tmp_path):
    # a zero (tied) embedding makes every logit 0: p = 1/V for each token, argmax is id 0
    _, state_dict, _ = load('released')
    state_dict = {k: torch.zeros_like(v) if k.endswith(('wte.weight', 'lm_head.weight')) else v for k, v in state_dict.items()}
    model, _ = run_folder.load_checkpoint(release_folder(tmp_path, state_dict=state_dict))
    V = model.config.vocab_size
    encoded = [([5, 6, 0], 1), ([5, 0, 0], 2), ([5, 6, 7, 0], 2), ([5, 7], 1)]   # words: [0], [0, 0], [7, 0], [7]
    acc, ppl = lambada.summary(lambada.score(model.eval(), encoded, {}, 3, 'cpu'))
    assert acc == 0.5
    assert ppl == pytest.approx(V ** ((1 + 2 + 2 + 1) / 4), rel=1e-5)   # exp(mean k log V)


def test_lambada_command_sweeps_a_knob_on_a_release(tmp_path, capsys):
    (tmp_path / 'p.txt').write_text("the loop runs the same block again\na stable loop forgets where it started\n")
    res = lambada.main([f'--init_from={release_folder(tmp_path)}', f'--input={tmp_path / "p.txt"}',
                        '--sweep=num_recur=1,4'])
    assert [r['num_recur'] for r in res] == [1, 4] and all(r['passages'] == 2 for r in res)
    assert all(0 <= r['accuracy'] <= 1 and r['perplexity'] >= 1 for r in res)
    assert res[0]['perplexity'] != res[1]['perplexity']   # the depth reaches the score
    with pytest.raises(SystemExit) as e:
        lambada.main([f'--init_from={tmp_path / "released"}', f'--input={tmp_path / "p.txt"}', '--frob=1'])
    assert e.value.code == 2 and "unknown key 'frob'" in capsys.readouterr().err


def test_eval_and_a_fine_tune_refuse_a_release_in_one_line(tmp_path, capsys):
    # no dataset here is in their tokenizer.json: eval's val loss and a fine-tune would read other ids
    from tools import eval as tools_eval
    folder = release_folder(tmp_path)
    with pytest.raises(SystemExit) as e:
        tools_eval.main([f'--out_dir={folder}'])
    assert e.value.code == 2 and 'tools.lambada' in capsys.readouterr().err
    with pytest.raises(ConfigError, match='tokenizer.json'):
        run_folder.load_start(None, {'init_from': folder, 'model': 'parcae'}, None)


def test_eval_refuses_a_release_naming_task_lambada_which_scores_it(tmp_path, capsys):
    from tools import eval as tools_eval
    folder = release_folder(tmp_path)
    (tmp_path / 'p.txt').write_text("the loop runs the same block again\na stable loop forgets where it started\n")
    with pytest.raises(SystemExit):
        tools_eval.main([f'--out_dir={folder}'])
    assert f'python -m tools.eval --out_dir={folder} --task=lambada' in capsys.readouterr().err
    got = tools_eval.main([f'--out_dir={folder}', '--task=lambada', f'--input={tmp_path / "p.txt"}',
                           '--sweep=num_recur=1..2', '--batch_size=1'])['lambada']
    assert got == lambada.main([f'--init_from={folder}', f'--input={tmp_path / "p.txt"}', '--sweep=num_recur=1,2',
                                '--batch_size=1'])
    assert [r['num_recur'] for r in got] == [1, 2]
