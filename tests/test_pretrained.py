"""pretrained.py's releases (hf:OWNER/NAME or a folder as the authors' from_pretrained reads one)
and tools.lambada, through the fixture of tests/fixtures/parcae_authors/: a release folder reaches
their logits, sample.py generates from it with their tokenizer, the hub path asks for their files
in their order (served from the fixture: nothing is downloaded), a missing package is one line,
and LAMBADA's scoring equals a naive per-passage loop and a case worked out by hand (tools.eval
--task=lambada scores a release as tools.lambada does); prepare_data.py lambada: test_lambada.py.
A fine-tune: prepare_data.py --tokenizer=json:<release> encodes a text as their tokenizer does, and
train.py --init_from=<release> starts from their weights on it, or refuses other data in one line.
Tests that need the tokenizers package (not a requirement) are skipped without it."""
import functools
import importlib.util
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import prepare_data
import pretrained
import run_folder
import sample
from conftest import make_char_dataset, read_log, train_script
from configurator import ConfigError
from parcae import parcae_reference
from test_parcae_authors import FIXTURE, load, tolerance
from tools import lambada

needs_tokenizers = pytest.mark.skipif(importlib.util.find_spec('tokenizers') is None,
                                      reason="the authors' tokenizer.json needs the tokenizers package")


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


@needs_tokenizers
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


@needs_tokenizers
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


@needs_tokenizers
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


@needs_tokenizers
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


def test_eval_refuses_a_release_in_one_line(tmp_path, capsys):
    # a release has no run config and no dataset: eval's val loss has nothing to read
    from tools import eval as tools_eval
    folder = release_folder(tmp_path)
    with pytest.raises(SystemExit) as e:
        tools_eval.main([f'--out_dir={folder}'])
    assert e.value.code == 2 and 'tools.lambada' in capsys.readouterr().err


@needs_tokenizers
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


# ----------------------------------------------------------------------------- fine-tuning a release
LOOP = 'the loop runs the same block again; a stable loop forgets where it started. '   # the fixture's vocabulary


def json_dataset(tmp_path, folder, name='loop', repeats=60):
    """data_dir holding NAME_json_<sha8>: LOOP repeated, prepared with --tokenizer=json:folder; its folder."""
    (tmp_path / 'loop.txt').write_text(LOOP * repeats)
    return prepare_data.prepare(name, tokenizer=f'json:{folder}', input=str(tmp_path / 'loop.txt'),
                                out_dir=str(tmp_path / 'data'), quiet=True)


@needs_tokenizers
def test_a_text_prepared_with_a_release_tokenizer_holds_its_ids(tmp_path, monkeypatch):
    from tokenizers import Tokenizer
    folder = release_folder(tmp_path)
    sha = pretrained.read_release(folder)['meta']['tokenizer_sha256']
    # encoded in chunks of about 100 characters: the cuts between words change no id
    monkeypatch.setattr(prepare_data, '_bpe_chunks', functools.partial(prepare_data._bpe_chunks, size=50))
    dest = json_dataset(tmp_path, folder)
    assert os.path.basename(dest) == f'loop_json_{sha[:8]}'
    meta = json.load(open(os.path.join(dest, 'meta.json')))
    assert (meta['tokenizer'], meta['tokenizer_sha256'], meta['vocab_size']) == ('json', sha, 64)
    with open(os.path.join(dest, 'tokenizer.json'), 'rb') as a, open(os.path.join(folder, 'tokenizer.json'), 'rb') as b:
        assert a.read() == b.read()
    text, tok = LOOP * 60, Tokenizer.from_file(os.path.join(FIXTURE, 'tokenizer.json'))
    cut = int(len(text) * 0.9)   # text_file's split: ASCII, so the cut is the byte it falls on
    for split, part in (('train', text[:cut]), ('val', text[cut:])):
        ids = np.fromfile(os.path.join(dest, f'{split}.bin'), dtype=np.uint16).tolist()
        assert ids == tok.encode(part, add_special_tokens=False).ids
    shutil.rmtree(folder)   # the dataset keeps its own copy of the tokenizer
    for where in (dest, meta):
        encode, decode = prepare_data.get_tokenizer(where)
        assert decode(encode(LOOP)) == LOOP and decode([3, 64, 3]) == 'a\ufffda'
    assert prepare_data.prepare_command(os.path.basename(dest)) == \
        'python prepare_data.py loop --input FILE --tokenizer=json:PATH'


def test_a_json_tokenizer_mistake_is_one_line(tmp_path, monkeypatch, capsys):
    folder = release_folder(tmp_path)
    (tmp_path / 'loop.txt').write_text(LOOP * 60)
    text = str(tmp_path / 'loop.txt')
    for tokenizer, kw, said in [
            (f'json:{tmp_path}/nothing', {}, 'no such tokenizer.json, nor a folder holding one'),
            ('json:', {}, "unknown tokenizer 'json:'"),
            (f'json:{folder}', {'vocab': 300}, '--vocab restricts the gpt2 tokenizer'),
            (f'json:{folder}', {'name': 'synthetic', 'input': None}, '--tokenizer=json: encodes a text')]:
        with pytest.raises(prepare_data.DataError, match=said):
            prepare_data.prepare(**{'name': 'loop', 'input': text, 'tokenizer': tokenizer, 'out_dir': str(tmp_path / 'd'),
                                    'quiet': True, **kw})
    monkeypatch.setitem(sys.modules, 'tokenizers', None)   # import tokenizers raises ImportError
    with pytest.raises(SystemExit) as e:
        prepare_data.main(['loop', '--input', text, f'--tokenizer=json:{folder}', '--out_dir', str(tmp_path / 'd')])
    assert e.value.code == 2 and capsys.readouterr().err.strip().splitlines() == [
        f"error: {folder}/tokenizer.json is read by the tokenizers package, which is not installed: pip install tokenizers"]
    assert not os.path.exists(tmp_path / 'd')
    assert prepare_data.dataset_dirname('shakespeare', 'json', sha256='0123abcd' * 8) == 'shakespeare_json_0123abcd'
    assert prepare_data.prepare_command('shakespeare_json_0123abcd') == \
        'python prepare_data.py shakespeare --tokenizer=json:PATH'
    with pytest.raises(prepare_data.DataError, match="'loop_json_0123abcd' is the folder that python prepare_data.py "
                                                     "loop --input FILE --tokenizer=json:PATH writes"):
        prepare_data.prepare('loop_json_0123abcd', input=text, out_dir=str(tmp_path / 'd'), quiet=True)


@needs_tokenizers
def test_a_vocabulary_past_uint16_is_refused(tmp_path):
    from tokenizers import Tokenizer, models
    vocab = {f'w{i}': i for i in range(65537)}
    Tokenizer(models.WordLevel(vocab, unk_token='w0')).save(str(tmp_path / 'tokenizer.json'))
    (tmp_path / 'words.txt').write_text('w1 w2 w3\n' * 100)
    with pytest.raises(prepare_data.DataError, match='has 65,537 token ids, more than the 65,536'):
        prepare_data.prepare('words', tokenizer=f'json:{tmp_path}', input=str(tmp_path / 'words.txt'),
                             out_dir=str(tmp_path / 'd'), quiet=True)


FINE_TUNE = ['--batch_size=4', '--eval_iters=2', '--log_interval=1', '--compile=False', '--device=cpu',
             '--warmup_iters=0', '--schedule=constant', '--learning_rate=3e-3']


@needs_tokenizers
def test_a_fine_tune_starts_from_the_release_and_sample_reads_it(tmp_path, monkeypatch, capsys):
    folder = release_folder(tmp_path)
    dest = json_dataset(tmp_path, folder)
    out = tmp_path / 'out'
    loaded, load_start = {}, run_folder.load_start

    def spy(model, cfg, ckpt):   # the weights the run starts from
        load_start(model, cfg, ckpt)
        loaded.update({k: v.clone() for k, v in model.state_dict().items()})
    monkeypatch.setattr(run_folder, 'load_start', spy)
    args = [f'--init_from={folder}', f'--data_dir={tmp_path / "data"}', f'--dataset={os.path.basename(dest)}',
            f'--out_dir={out}', *FINE_TUNE]
    train_script().main(args + ['--max_iters=2'])
    release = pretrained.read_release(folder)
    assert loaded.keys() == release['model'].keys()
    assert all(torch.equal(loaded[k], release['model'][k]) for k in loaded)
    ckpt = torch.load(out / 'ckpt.pt', weights_only=False)
    assert ckpt['model_name'] == 'parcae' and ckpt['model_args'] == release['model_args']   # block_size 64, not 128
    assert ckpt['meta']['tokenizer'] == 'json' and ckpt['config']['init_from'] == folder
    train_script().main(args + ['--max_iters=10', '--init_from=resume'])   # an ordinary run: it resumes
    evals = {r['iter']: r['val_loss'] for r in read_log(out, 'eval')}
    assert sorted(evals) == [0, 2, 10] and evals[10] < evals[0] - 0.1, evals

    shutil.rmtree(folder)   # the run reads the dataset's copy of the tokenizer
    capsys.readouterr()
    sample.main([f'--out_dir={out}', '--start=the loop', '--max_new_tokens=8', '--temperature=0', '--num_recur=2'])
    model, ckpt = run_folder.load_checkpoint(str(out))
    encode, decode = prepare_data.get_tokenizer(ckpt['meta'])
    idx = torch.tensor([encode('the loop')])
    with torch.no_grad():
        for _ in range(8):
            idx = torch.cat([idx, model.eval()(idx, num_recur=2)[0][:, -1:].argmax(-1)], 1)
    assert capsys.readouterr().out.split('\n---------------')[0] == decode(idx[0].tolist())


def test_a_fine_tune_on_data_of_another_tokenizer_is_one_line(tmp_path, capsys):
    folder = release_folder(tmp_path)
    data_dir = make_char_dataset(str(tmp_path / 'data'))
    other = tmp_path / 'data' / 'other_json_00000000'   # encoded with another tokenizer.json
    other.mkdir()
    for split in ('train', 'val'):
        (np.arange(200) % 64).astype(np.uint16).tofile(other / f'{split}.bin')
    (other / 'meta.json').write_text(json.dumps({'tokenizer': 'json', 'tokenizer_sha256': '0' * 64, 'vocab_size': 64}))
    sha = pretrained.read_release(folder)['meta']['tokenizer_sha256']
    prepare = f'python prepare_data.py NAME --input FILE --tokenizer=json:{folder}'
    for dataset, extra, said in [
            ('tiny', [], f'is encoded with the char tokenizer: prepare a text with its tokenizer, {prepare}, and '
                         f'fine-tune on the folder it writes (--dataset=NAME_json_{sha[:8]})'),
            ('other_json_00000000', [], 'is encoded with another tokenizer.json (sha256 00000000)'),
            ('tiny', ['--model=gpt'], f"init_from={folder} holds a 'parcae' model, not 'gpt'")]:
        with pytest.raises(SystemExit) as e:
            train_script().main([f'--init_from={folder}', f'--data_dir={data_dir}', f'--dataset={dataset}',
                                 f'--out_dir={tmp_path / "out"}', *FINE_TUNE, '--max_iters=2', *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and err[0].startswith('error: ') and said in err[0], err
        assert prepare in err[0] or extra
    assert not os.path.exists(tmp_path / 'out' / 'ckpt.pt')


def test_a_dry_run_from_a_release_sizes_the_release_s_model(tmp_path, capsys):
    # --dry_run=True with --init_from=<release> prints the release's parameters, not a default parcae's (no data
    # read: a dry run needs none); a field given on the command line still wins
    folder = release_folder(tmp_path)
    model, _ = run_folder.load_checkpoint(folder)
    train_script().main([f'--init_from={folder}', '--dry_run=True', f'--data_dir={tmp_path}', '--compile=False'])
    out = capsys.readouterr().out
    flops = lambda text: next(line for line in text.splitlines() if line.startswith('flops_per_token'))  # noqa: E731
    assert 'model: parcae' in out and f'parameters: {model.num_params()}\n' in out
    assert flops(out) == f"flops_per_token: {model.flops_per_token(model.config.block_size):.0f}"
    train_script().main([f'--init_from={folder}', '--dry_run=True', f'--data_dir={tmp_path}', '--mean_recurrence=2'])
    fewer = capsys.readouterr().out
    assert f'parameters: {model.num_params()}\n' in fewer and flops(fewer) != flops(out)   # the same weights, run less
