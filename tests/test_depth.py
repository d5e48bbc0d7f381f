"""The depth task (battery.py's hops): the answer is k pointer lookups away, and train.py's
loss_on='answers' scores only the answer spans."""
import json
import math
import os

import numpy as np
import pytest

import prepare_data
from battery import HOP_LETTERS, HOP_QUERIES, HOPS, HOP_TASKS, UP_TO, lookups, suffix_answers, synthetic_examples, synthetic_split
from conftest import read_log, run_script, train_script


@pytest.mark.parametrize('task', list(HOP_TASKS))
def test_hop_answers_follow_the_pointers_k_times(task):
    k = int(task[3:])
    for prompt, answer, suffix in synthetic_examples(task, 200, seed=3):
        name, *pairs, query = prompt.split(' ')
        assert name == task and query == f'{k}{query[-1]}' and all(len(p) == 2 for p in pairs)
        nxt = dict(pairs)
        assert len(nxt) == HOP_LETTERS and sorted(nxt.values()) == sorted(nxt)   # a permutation of 8 letters
        q = x = query[-1]
        seen = []
        for _ in range(HOP_LETTERS):   # ... that is one cycle, so no hop count short of 8 comes back
            x = nxt[x]
            seen.append(x)
        assert seen[-1] == q and len(set(seen)) == HOP_LETTERS
        assert answer == seen[k - 1] and answer != q
        prev = {b: a for a, b in pairs}    # k steps along are 8 - k back: the fewest lookups, lookups(k)
        x = q
        for _ in range(HOP_LETTERS - k):
            x = prev[x]
        assert x == answer and lookups(k) == min(k, HOP_LETTERS - k) and lookups(6) == 2
        # seven more queries, each its own letter and hop count, no (letter, k) twice, each answer marked
        asked = suffix.split(' ')[1:]
        assert suffix.startswith(' ') and len(asked) == HOP_QUERIES - 1 and all(len(a) == 3 for a in asked)
        assert len({(a[1], a[0]) for a in asked} | {(q, str(k))}) == HOP_QUERIES
        for j, x, a in asked:
            assert int(j) in HOPS
            for _ in range(int(j)):
                x = nxt[x]
            assert a == x
        assert [suffix[lo:hi] for lo, hi in suffix_answers(task, suffix)] == [a[-1] for a in asked]
    assert suffix_answers('add', ' = 5 ? x = y') == []


def test_the_curriculum_asks_only_up_to_n_hops_in_the_task_s_alphabet(tmp_path):
    # hopsN (the gate's curriculum, whose weights start the task): the task's layout with every query at most N hops,
    # written with the same vocabulary as hops so one model reads all; at N = 1 all eight queries are one hop,
    # each letter once
    names = ['hops'] + [f'hops{n}' for n in UP_TO]
    for name in names:
        prepare_data.prepare(name, out_dir=str(tmp_path), n_train=50, n_val=20, quiet=True)
    meta = {n: json.load(open(tmp_path / n / 'meta.json')) for n in names}
    for n in UP_TO:
        name = f'hops{n}'
        assert meta[name]['itos'] == meta['hops']['itos'] and meta[name]['tasks'] == [f'hop{k}of{n}' for k in range(1, n + 1)]
        itos = meta[name]['itos']
        ids = np.fromfile(tmp_path / name / 'train.bin', dtype=np.uint16)
        marks = np.fromfile(tmp_path / name / 'train_answers.bin', dtype=np.uint8)
        lines = ''.join(itos[i] for i in ids).split('\n')[:-1]
        assert len(lines) == 50 and marks.sum() == 8 * 50                   # what was written: every answer marked
        ks = set()
        for line in lines:
            words = line.split(' ')
            nxt, asked = dict(words[1:9]), [words[9]] + words[10:]
            assert words[0] == f'hop{asked[0][0]}' and len(asked) == 8
            for j, x, a in asked:
                ks.add(int(j))
                for _ in range(int(j)):
                    x = nxt[x]
                assert a == x
            if n == 1:
                assert sorted(a[1] for a in asked) == sorted(nxt)
        assert ks == set(range(1, n + 1))


def test_no_later_answer_follows_by_elimination():
    # at one k a listing's answers are a permutation, so the last would be known without a lookup; the seven
    # later queries mix hop counts: over many listings, a later answer repeats an earlier one about as often as
    # eight independent letters of eight would (1 - (7/8)^7 of the time for the last ~ 0.6), never 0
    repeats = 0
    examples = synthetic_examples('hop2', 400, seed=5)
    for prompt, answer, suffix in examples:
        answers = [answer] + [a[-1] for a in suffix.split(' ')[1:]]
        repeats += answers[-1] in answers[:-1]
    assert 0.4 < repeats / len(examples) < 0.8


def test_the_test_split_is_disjoint_and_leaves_train_and_val_as_they_were():
    # verdicts read test, which no rate choice, curriculum decision or stop rule reads: it must share no
    # example with train or val, and asking for it must not move a single train or val example
    without = synthetic_split(1337, 1200, 300, HOP_TASKS)
    ex = synthetic_split(1337, 1200, 300, HOP_TASKS, n_test=300)
    assert 'test' not in without and (ex['train'], ex['val']) == (without['train'], without['val'])
    text = {s: [''.join(e[1:]) for e in ex[s]] for s in ex}
    assert len(text['test']) == len(set(text['test'])) == 300
    assert not set(text['test']) & (set(text['train']) | set(text['val']))
    assert [e[0] for e in ex['test']].count('hop3') == 300 // len(HOP_TASKS)
    assert synthetic_split(1337, 1200, 300, HOP_TASKS, n_test=300)['test'] == ex['test']


def test_prepare_writes_the_test_split_and_the_battery_reads_it(tmp_path):
    # prepare_data.py hops --n_test N writes test.bin / test_answers.bin from the test examples, train and
    # val byte for byte as without it; the battery reading (tools.eval --battery --split=test) reads those
    from types import SimpleNamespace
    from battery import synthetic_ids
    from configurator import ConfigError
    from tools.eval_fill import battery_examples
    plain = prepare_data.prepare('hops1', out_dir=str(tmp_path / 'a'), n_train=200, n_val=40, quiet=True)
    d = prepare_data.prepare('hops1', out_dir=str(tmp_path / 'b'), n_train=200, n_val=40, n_test=40, quiet=True)
    meta = json.load(open(os.path.join(d, 'meta.json')))
    ex = synthetic_split(1337, 200, 40, UP_TO[1], n_test=40)
    ids, marks = (np.asarray(a).tolist() for a in synthetic_ids(ex["test"], prepare_data.get_tokenizer(meta)[0]))
    assert np.fromfile(os.path.join(d, 'test.bin'), dtype=np.uint16).tolist() == ids
    assert np.fromfile(os.path.join(d, 'test_answers.bin'), dtype=np.uint8).tolist() == marks
    for f in ('train.bin', 'val.bin', 'train_answers.bin', 'val_answers.bin'):
        assert open(os.path.join(d, f), 'rb').read() == open(os.path.join(plain, f), 'rb').read(), f

    def reading(split, folder):
        ev = SimpleNamespace(meta=json.load(open(os.path.join(folder, 'meta.json'))), opt={'split': split},
                             tcfg={'dataset': 'hops1', 'data_dir': os.path.dirname(folder)})
        return battery_examples(ev, 40)[1]['hop1of1']
    assert reading('test', d) == [tuple(e[1:]) for e in ex['test']]
    assert reading('val', d) == reading('val', plain) == [tuple(e[1:]) for e in ex['val']]
    with pytest.raises(ConfigError, match=r"hops1 has no 'test' split \(python prepare_data.py hops1 --n_test N\)"):
        reading('test', plain)
    p = run_script('prepare_data.py', 'tiny', '--input', os.path.join(d, 'meta.json'), '--n_test=5',
                   f'--out_dir={tmp_path}/c', check=False)
    assert p.returncode == 2 and '--n_test (test examples) is for a synthetic dataset' in p.stderr


@pytest.fixture(scope='module')
def hops(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('data'))
    prepare_data.prepare('hops', out_dir=root, n_train=1200, n_val=300, n_test=60, quiet=True)
    return root


def test_loss_on_answers_keeps_only_the_answer_targets_of_whole_examples(hops):
    itos = json.load(open(os.path.join(hops, 'hops', 'meta.json')))['itos']
    T = train_script()
    cfg = {**T.DEFAULTS, 'data_dir': hops, 'dataset': 'hops', 'block_size': 128, 'batch_size': 8, 'loss_on': 'answers'}
    data = T.load_data(cfg)
    for split, it in (('train', 3), ('val', -1)):
        x, y, _ = T.get_batch(split, it, 0, data)
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            text = ''.join(itos[i] for i in row_x)
            assert text.startswith('hop') and '\n' in text   # a window starts with an example and holds it whole
            # position i's target is an answer iff i ends a query ' k x' (the answer is the letter after it)
            want = [text[i - 2] == ' ' and text[i - 1].isdigit() and text[i].isalpha() for i in range(2, len(text))]
            assert [t != -1 for t in row_y[2:]] == want and row_y[:2] == [-1, -1]
            assert all(t == -1 or itos[t].isalpha() for t in row_y)


def test_loss_on_answers_is_refused_where_it_cannot_hold(hops, char_data, tmp_path):
    common = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--batch_size=4', '--eval_iters=1', '--max_iters=0',
              '--compile=False', '--loss_on=answers', f'--out_dir={tmp_path}/r']
    p = run_script('train.py', f'--data_dir={char_data}', '--dataset=tiny', '--block_size=32', *common, check=False)
    assert p.returncode == 2 and 'answers.bin, the answer marks of a synthetic dataset' in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = run_script('train.py', f'--data_dir={hops}', '--dataset=hops', '--block_size=16', *common, check=False)
    assert p.returncode == 2 and 'a window of block_size 16 may cut one; raise block_size to at least' in p.stderr


def test_answer_loss_falls_below_its_failure_mode(hops, tmp_path):
    """An answer is one letter. Untrained it costs ~ln(vocab); a model that learned only the format
    (a letter comes) pays ~ln(26). 300 steps of a tiny GPT must end below the midpoint of the two."""
    out = tmp_path / 'r'
    run_script('train.py', f'--data_dir={hops}', '--dataset=hops', '--loss_on=answers', '--block_size=128',
               '--n_layer=1', '--n_head=2', '--n_embd=32', '--batch_size=4', '--eval_iters=8', '--compile=False',
               '--max_iters=300', '--eval_interval=300', '--learning_rate=3e-3', '--warmup_iters=20',
               f'--out_dir={out}')
    vocab = json.load(open(os.path.join(hops, 'hops', 'meta.json')))['vocab_size']
    first, last = [r['val_loss'] for r in read_log(out, 'eval')][::len(read_log(out, 'eval')) - 1]
    assert abs(first - math.log(vocab)) < 0.5
    assert last < (math.log(vocab) + math.log(26)) / 2
    # eval.py scores such a run where it trained: its eval set gives the logged val loss, and the
    # stream's answers whose example starts inside the block score near it
    import tools.eval as ev
    got = ev.main([f'--out_dir={out}', f'--out={tmp_path}/e'])['score']
    assert got['loss'] == pytest.approx(last, abs=1e-5)
    stream = ev.main([f'--out_dir={out}', f'--out={tmp_path}/s', '--stream=True'])['score']
    # the stream: every val example once, in a window that starts at it (as train.py's do), its own eight answers
    import data
    val = os.path.join(hops, 'hops', 'val.bin')
    starts = data.example_starts(val, [json.load(open(os.path.join(hops, 'hops', 'meta.json')))['stoi']['\n']], 128)
    assert stream['tokens'] == 8 * len(starts) and abs(stream['loss'] - last) < 0.2
    # the battery reads the test split's own examples (no eval set needed): 10 per hop count, exact match a
    # multiple of 1/10, and its JSON names the split
    got = ev.main([f'--out_dir={out}', f'--out={tmp_path}/t', '--battery=True', '--split=test', '--battery_n=10'])
    assert got['battery']['split'] == 'test' and set(got['battery']['tasks']) == set(HOP_TASKS)
    assert all(abs(10 * r['generate'] - round(10 * r['generate'])) < 1e-9 for r in got['battery']['tasks'].values())
