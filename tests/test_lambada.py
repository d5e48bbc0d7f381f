"""LAMBADA from the command line, without the tokenizers package: prepare_data.py lambada fetches its
test set (from a local server, nothing downloaded) or copies one, checked and swapped in whole, and
python -m tools.eval --task=lambada scores a run of this repo as tools.lambada does."""
import hashlib
import json
import os

import numpy as np
import pytest

import prepare_data as P
from conftest import train_script
from test_prepare_data import assert_clean_error, cli, server  # noqa: F401 (server: its local HTTP server fixture)
from tools import lambada


def lambada_jsonl(texts):
    return ''.join(json.dumps({'text': t}) + '\n' for t in texts).encode('utf-8')


def test_prepare_lambada_downloads_or_copies_the_test_set_and_refuses_a_cut_one(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
    monkeypatch.delenv('PREPARE_DATA_URL', raising=False)
    body = lambada_jsonl(['the loop runs the same block again', 'a stable loop forgets where it started',
                          'caf\u00e9 \u00fcber the end'])
    server.files['/lambada_test.jsonl'] = body
    monkeypatch.setitem(P.SHA256, 'lambada_test.jsonl', hashlib.sha256(body).hexdigest())
    monkeypatch.setitem(P.SIZES, 'lambada_test.jsonl', len(body))
    monkeypatch.setattr(P, 'LAMBADA_PASSAGES', 3)
    data = tmp_path / 'data'
    d = P.prepare('lambada', url=server.url, out_dir=str(data), quiet=True)
    assert d == str(data / 'lambada') and os.listdir(d) == ['lambada_test.jsonl']
    assert (data / 'lambada' / 'lambada_test.jsonl').read_bytes() == body and server.log == [('/lambada_test.jsonl', None)]
    assert lambada.read_passages(os.path.join(d, 'lambada_test.jsonl'))[2] == ('caf\u00e9 \u00fcber the', ' end')
    # offline: a local copy, the folder replaced whole; a cut copy or a wrong count is one line, the folder kept
    (tmp_path / 'copy.jsonl').write_bytes(body)
    (data / 'lambada' / 'meta.json').write_text('{}')   # what an earlier prepare of this folder could have left
    P.main(['lambada', '--input', str(tmp_path / 'copy.jsonl'), '--out_dir', str(data)])
    assert os.listdir(d) == ['lambada_test.jsonl'] and 'wrote' in capsys.readouterr().out
    for cut, why in [(body[:-12], 'lambada_test.jsonl:3: not a JSON row'), (b'\xff' + body, 'is not UTF-8 text'),
                     (body[:body.rindex(b'{')], '2 passages, not')]:
        (tmp_path / 'lambada_test.jsonl').write_bytes(cut)
        with pytest.raises(SystemExit) as e:
            P.main(['lambada', '--input', str(tmp_path / 'lambada_test.jsonl'), '--out_dir', str(data)])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and err[0].startswith('error: ') and why in err[0], err
    assert (data / 'lambada' / 'lambada_test.jsonl').read_bytes() == body
    # a download of another size: one line naming the offline way; an unknown name lists lambada
    server.files['/lambada_test.jsonl'] = body[:-12]
    with pytest.raises(P.DataError, match='gave .* bytes, expected .*prepare_data.py lambada --out_dir .* --input FILE'):
        P.prepare('lambada', url=server.url, out_dir=str(tmp_path / 'other'), quiet=True)
    with pytest.raises(P.DataError, match='lambada'):
        P.prepare('lambadda')
    with pytest.raises(P.DataError, match='--tokenizer and --vocab do not apply'):
        P.prepare('lambada', tokenizer='gpt2', out_dir=str(data))


def test_prepare_lambada_as_a_script_refuses_a_cut_file_in_one_line(tmp_path):
    (tmp_path / 'cut.jsonl').write_bytes(lambada_jsonl(['the loop runs the same block again'] * 4)[:-5])
    p = cli('lambada', '--input', tmp_path / 'cut.jsonl', '--out_dir', tmp_path)
    assert_clean_error(p, 'cut.jsonl:4: not a JSON row')
    assert len(p.stderr.strip().splitlines()) == 1 and not os.path.exists(tmp_path / 'lambada')


def test_eval_task_lambada_scores_as_tools_lambada_and_training_beats_no_training(char_data, tmp_path, monkeypatch,
                                                                                   capsys):
    from tools import eval as tools_eval
    meta = json.load(open(os.path.join(char_data, 'tiny', 'meta.json')))
    ids = np.fromfile(os.path.join(char_data, 'tiny', 'train.bin'), dtype=np.uint16)
    texts = P.get_tokenizer(meta)[1](ids[:3000].tolist()).split('\n')[1:21]   # passages of the training text
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(P, 'LAMBADA_PASSAGES', len(texts))
    (tmp_path / 'copy.jsonl').write_bytes(lambada_jsonl(texts))
    with pytest.raises(SystemExit) as e:   # before prepare_data.py lambada: one line saying to run it
        tools_eval.main(['--out_dir=nowhere', '--task=lambada'])
    assert e.value.code == 2 and capsys.readouterr().err.strip().splitlines() == [
        'error: no passages at data/lambada/lambada_test.jsonl: run python prepare_data.py lambada first '
        '(offline: --input FILE)']
    P.prepare('lambada', input='copy.jsonl', quiet=True)
    score = {}
    for name, iters in (('untrained', 0), ('trained', 150)):
        train_script().main([f'--data_dir={char_data}', '--dataset=tiny', f'--out_dir={name}', '--n_layer=1',
                             '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=8', '--eval_iters=1',
                             f'--max_iters={iters}', f'--eval_interval={max(iters, 1)}', '--learning_rate=3e-3',
                             '--warmup_iters=10', '--compile=False', '--device=cpu'])
        score[name] = tools_eval.main([f'--out_dir={name}', '--task=lambada', '--device=cpu'])['lambada']
        assert score[name] == lambada.main([f'--out_dir={name}', '--device=cpu'])
        assert score[name][0]['passages'] == len(texts)
        assert json.load(open(os.path.join(name, 'eval', 'lambada.json')))['results'] == score[name]
    assert score['trained'][0]['perplexity'] < score['untrained'][0]['perplexity']
    capsys.readouterr()
    for args, why in [(['--task=lambda'], "task must be lambada (or '' for eval's own scores), got 'lambda'"),
                      (['--task=lambada', '--stream=True'], 'stream does not apply to --task=lambada'),
                      (['--task=lambada', '--frob=1'], "unknown key 'frob'")]:
        with pytest.raises(SystemExit) as e:
            tools_eval.main(['--out_dir=trained', *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and why in err[0], err


def test_training_on_lambada_says_what_it_is_for(tmp_path, capsys):
    # prepare_data.py lambada writes passages to score, not a token stream: a run naming it is told so,
    # not sent to prepare it again
    # (under another tokenizer's name too: prepare_data.py refuses --tokenizer for lambada, so no hint may paste it)
    for name in ('lambada', 'lambada_gpt2', 'lambada_gpt2_512'):
        with pytest.raises(SystemExit) as e:
            train_script().main([f'--data_dir={tmp_path}', f'--dataset={name}', f'--out_dir={tmp_path}/o'])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and 'not a training set' in err[0] and 'prepare' not in err[0], err
    with pytest.raises(SystemExit) as e:   # a dataset of the user's own that starts so is not LAMBADA
        train_script().main([f'--data_dir={tmp_path}', '--dataset=lambada_char', f'--out_dir={tmp_path}/o'])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and 'prepare_data.py lambada_char --input FILE' in err[0], err
