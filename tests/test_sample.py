"""sample.py end to end from a trained checkpoint: generation, prompts, knobs, infill, errors; and
generate() on tiny models: O(1)-state decoding at any length, the crop of a learned position table."""
import types

import pytest
import torch

from conftest import run_script


@pytest.fixture(scope='module')
def trained(char_data, tmp_path_factory):
    out = tmp_path_factory.mktemp('sample') / 'out'
    run_script('train.py', f'--data_dir={char_data}', f'--out_dir={out}', '--dataset=tiny', '--n_layer=2',
               '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=16', '--max_iters=150',
               '--eval_interval=150', '--eval_iters=2', '--learning_rate=3e-3', '--warmup_iters=10',
               '--compile=False')
    return out


def test_generates_from_text_and_file(trained, tmp_path):
    p = run_script('sample.py', f'--out_dir={trained}', '--start=the cat', '--max_new_tokens=40',
                   '--num_samples=2', '--seed=1')
    samples = p.stdout.split('---------------')
    assert len([s for s in samples if s.strip()]) == 2
    assert all(s.strip().startswith('the cat') for s in samples if s.strip())
    again = run_script('sample.py', f'--out_dir={trained}', '--start=the cat', '--max_new_tokens=40',
                       '--num_samples=2', '--seed=1')
    assert again.stdout == p.stdout                       # seeded
    prompt = tmp_path / 'prompt.txt'
    prompt.write_text('a dog')
    p = run_script('sample.py', f'--out_dir={trained}', f'--start=FILE:{prompt}', '--max_new_tokens=5')
    assert p.stdout.startswith('a dog')


def test_generation_longer_than_block_size(trained):
    p = run_script('sample.py', f'--out_dir={trained}', '--start=the', '--max_new_tokens=80', '--temperature=0')
    assert len(p.stdout.split('---------------')[0].strip()) >= 80


def ranked(stdout):
    """[(score, text)] of sample.py's ranked infill, best first, and its header line."""
    lines = [ln for ln in stdout.splitlines() if ln.strip() and not ln.startswith('---')]
    return lines[0], [(float(ln.split(None, 1)[0]), ln.split(None, 1)[1]) for ln in lines[1:]]


def test_causal_infill_ranks_the_fitting_span_first(trained):
    p = run_script('sample.py', f'--out_dir={trained}', '--infill=True', '--start=the cat [MASK] on a mat.',
                   '--candidates=sat|ddd|ttt')
    head, rows = ranked(p.stdout)
    assert 'per character' in head and len(rows) == 3                       # every candidate, with its score
    assert rows[0][1] == 'the cat sat on a mat.' and rows[0][0] > rows[1][0] >= rows[2][0]
    p = run_script('sample.py', f'--out_dir={trained}', '--infill=True', '--start=the [MASK] sat',
                   '--num_candidates=4', '--span_tokens=3')
    head, rows = ranked(p.stdout)
    assert len(rows) == 4 and all(len(t) == len('the  sat') + 3 for _, t in rows)


def test_streams_one_sample_and_a_stop_prints_what_came(trained):
    """The tokens show before the run ends; SIGTERM (143) and Ctrl-C (130) print all that was
    generated, then one line."""
    import os
    import select
    import signal
    import subprocess
    import sys
    import conftest
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        p = subprocess.Popen([sys.executable, 'sample.py', f'--out_dir={trained}', '--start=the cat',
                              '--max_new_tokens=1000000'], cwd=conftest.CHECKOUT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, 'OMP_NUM_THREADS': '1'},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        seen = b''
        while len(seen) < len('the cat') + 5:          # streamed: text before the run could end
            ready, _, _ = select.select([p.stdout], [], [], 300)
            assert ready, 'no output within 300 s'
            seen += os.read(p.stdout.fileno(), 4096)
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
        out, err = (seen + out).decode(), err.decode()
        assert p.returncode == code, err
        text, sep, rest = out.rpartition('\n---------------\n')
        assert sep and rest == '' and text.startswith('the cat')
        how = ' by SIGTERM' if sig == signal.SIGTERM else ''
        n = int(err.split(f'interrupted{how} after ')[1].split()[0])
        assert len(text) == len('the cat') + n and n >= 5                     # every token generated, printed
        assert err.count('note:') == 1 and 'Traceback' not in err


def test_the_crop_note_is_said_once_per_run(trained):
    p = run_script('sample.py', f'--out_dir={trained}', '--start=the', '--max_new_tokens=40', '--num_samples=3')
    assert p.stdout.count('---------------') == 3 and p.stderr.count('sees only the last 32 tokens') == 1


@pytest.mark.parametrize('args,msg', [
    (['--start=hello ZEBRA'], 'cannot be encoded with the char tokenizer'),
    (['--num_recur=4'], 'unknown key(s) num_recur'),
    (['--start=FILE:/nonexistent.txt'], 'prompt file not found'),
    (['--infill=True', '--start=no marker'], "needs the marker '[MASK]'"),
    (['--temperature=hot'], "config key 'temperature' expects float"),
    (['--seed=100000000000000000000000'], 'seed must be an integer from 0 to 2**63 - 1'),
    (['--seed=-1'], 'seed must be an integer from 0 to 2**63 - 1'),
    (['--seed=9223372036854775808'], 'seed must be an integer from 0 to 2**63 - 1'),
    (['--infill=True', '--start=the [MASK] sat', '--candidates=cat||dog'], "candidate 2 of 'cat||dog' is empty"),
    (['--infill=True', '--start=the [MASK] sat', '--candidates=cat|ZEBRA'],
     "candidate 'ZEBRA' cannot be encoded with the char tokenizer"),
    (['--infill=True', '--start=the [MASK] sat [MASK]', '--candidates=cat'], 'one span: put exactly one marker'),
    (['--infill=True', '--start=the [MASK] sat', '--candidates=cat', '--num_samples=2'],
     'num_samples does not apply to infill with --candidates'),
    (['--infill=True', '--start=the [MASK] sat', '--candidates=cat', '--temperature=0'],
     'temperature does not apply to infill with --candidates'),
    (['--candidates=cat|dog'], 'candidates does not apply to generation'),
    (['--span_tokens=4'], 'span_tokens does not apply to generation'),
    (['--infill=True', '--start=the [MASK] sat', '--max_new_tokens=9'],
     "max_new_tokens does not apply to a causal model's infill without --candidates"),
    (['--temperature=0', '--num_samples=2'], 'temperature=0 (greedy) gives the same text every time'),
    (['--temperature=0', '--top_k=5'], 'top_k does nothing at temperature=0'),
    (['--infill=True', '--start=the [MASK] sat', '--temperature=0', '--num_candidates=4'],
     'temperature=0 (greedy) draws the same span every time'),
    (['--span_tokens=0', '--infill=True', '--start=the [MASK]'], 'span_tokens must be None or an integer >= 1'),
    (['--causal=False'], 'causal=False is a non-generative'),
    (['--infill=True', '--start=the [MASK] sat', '--candidates=cat', '--causal=False'], 'causal=False is a non-generative'),
])
def test_bad_input_one_line(trained, args, msg):
    p = run_script('sample.py', f'--out_dir={trained}', *args, check=False)
    assert p.returncode == 2 and msg in p.stderr and 'Traceback' not in p.stderr, p.stderr


def test_missing_checkpoint(tmp_path):
    p = run_script('sample.py', f'--out_dir={tmp_path}', check=False)
    assert p.returncode == 2 and 'no checkpoint at' in p.stderr


# generate() itself, on tiny untrained models: which path every token takes
def tiny_models():
    from baselines import GPT, GPTConfig, Mamba2, Mamba2Config
    from fon import FON, FONConfig
    torch.manual_seed(0)
    return {
        'fon': FON(FONConfig(block_size=16, vocab_size=20, n_layer=2, n_embd=16, n_taps=4, max_delay=7,
                             pos_kernel=3, ripple_widths=(2, 4), addr_window=4)),
        'mamba2': Mamba2(Mamba2Config(block_size=16, vocab_size=20, n_layer=2, n_embd=16, d_state=8, expand=2,
                                      headdim=8, chunk_size=8)),
        'gpt_rope': GPT(GPTConfig(block_size=16, vocab_size=20, n_layer=2, n_head=2, n_embd=16, pos='rope')),
    }


def counting(model):
    """Wraps decode_step and forward; returns the call counts and the logits decode_step gave."""
    calls, logits = {'decode_step': 0, 'forward': 0}, []
    step, fwd = model.decode_step, model.forward

    def decode_step(idx_t, state):
        calls['decode_step'] += 1
        out, state = step(idx_t, state)
        logits.append(out)
        return out, state

    def forward(*a, **kw):
        calls['forward'] += 1
        return fwd(*a, **kw)
    model.decode_step, model.forward = decode_step, forward
    return calls, logits, fwd


@pytest.mark.parametrize('name', ['fon', 'mamba2', 'gpt_rope'])
def test_generation_three_block_sizes_long_decodes_every_token(name):
    """O(1)-state (and position-table-free) models decode every token through decode_step, far
    past block_size, and each step's logits are the parallel forward's at that position."""
    import sample
    model = tiny_models()[name].eval()
    calls, logits, forward = counting(model)
    prompt = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(1))
    n = 3 * model.config.block_size
    out = sample.generate(model, prompt, n, 0.0, 0, torch.Generator(), {})
    assert out.shape == (2, 5 + n) and torch.equal(out[:, :5], prompt)
    assert calls == {'decode_step': 5 + n - 1, 'forward': 0}
    with torch.no_grad():
        ref = forward(out)[0]
    torch.testing.assert_close(torch.stack(logits, 1), ref[:, :-1], atol=1e-4, rtol=1e-4)
    # greedy from the same logits: decode and forward agree to 1e-4, so only a top-2 gap inside that
    # tolerance may break the other way
    top2 = ref[:, 4:-1].topk(2, -1).values
    assert ((out[:, 5:] == ref[:, 4:-1].argmax(-1)) | (top2[..., 0] - top2[..., 1] < 2e-4)).all()


def test_learned_position_table_crops_and_says_so_once(capsys):
    import sample
    from baselines import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=16, vocab_size=20, n_layer=1, n_head=2, n_embd=16)).eval()
    calls, _, _ = counting(model)
    out = sample.generate(model, torch.zeros(1, 5, dtype=torch.long), 30, 0.0, 0, torch.Generator(), {})
    assert out.shape == (1, 35) and calls == {'decode_step': 0, 'forward': 30}
    err = capsys.readouterr().err
    assert err.count('note:') == 1 and 'learned position table has 16 rows' in err
    calls['forward'] = 0
    sample.generate(model, torch.zeros(1, 5, dtype=torch.long), 11, 0.0, 0, torch.Generator(), {})
    assert calls == {'decode_step': 5 + 11 - 1, 'forward': 0} and capsys.readouterr().err == ''   # fits: decoded


# infill's ranking and FON's holes through sample.main, on models whose answer is known
CHARS = sorted(set('add 0123456789+=\nxy'))


class Bigram(torch.nn.Module):
    """p(next | this char) from a table: probs {this: {next: p}}, the rest of each row shared evenly."""
    knobs = ()

    def __init__(self, probs):
        super().__init__()
        V = len(CHARS)
        table = torch.full((V, V), 1.0 / V)
        for a, row in probs.items():
            rest = (1 - sum(row.values())) / (V - len(row))
            table[CHARS.index(a)] = torch.tensor([row.get(c, rest) for c in CHARS])
        self.register_buffer('logp', table.log())
        self.config = types.SimpleNamespace(vocab_size=V, block_size=64)

    def forward(self, idx, **knobs):
        return self.logp[idx], None


def sample_main(monkeypatch, model, argv, mask_id=None):
    """sample.main on this model, as if loaded from a run trained on CHARS: (exit code, stdout, stderr)."""
    import contextlib
    import sample
    ckpt = {'config': {'mask_id': mask_id}, 'model_name': type(model).__name__.lower(),
            'meta': {'tokenizer': 'char', 'itos': CHARS, 'vocab_size': len(CHARS)}}

    def load(args):
        args['device'] = 'cpu'
        return model, ckpt, contextlib.nullcontext()
    monkeypatch.setattr(sample, 'load_model', load)
    code = 0
    try:
        sample.main(argv)
    except SystemExit as e:
        code = e.code
    return code


def test_candidates_of_different_lengths_compare_per_character(monkeypatch, capsys):
    """A sum of log-probabilities ranks '4' over '46' whatever follows, as a prefix scores fewer
    terms; per character, '46' (p 0.5 then 0.9) beats '4' (0.5), and the scores printed are those."""
    import math
    model = Bigram({' ': {'4': 0.5, '6': 0.3}, '4': {'6': 0.9}, '6': {'\n': 0.9}})
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add 12+34 = [MASK]', '--candidates=4|46']) == 0
    head, rows = ranked(capsys.readouterr().out)
    assert 'per character' in head and [t for _, t in rows] == ['add 12+34 = 46', 'add 12+34 = 4']
    assert [round(s, 4) for s, _ in rows] == [round((math.log(0.5) + math.log(0.9)) / 2, 4), round(math.log(0.5), 4)]
    # the text after the marker is scored with the candidate: '6' is followed by a newline, '4' is not
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add 12+34 = [MASK]\n', '--candidates=4|6']) == 0
    _, rows = ranked(capsys.readouterr().out)
    assert [t for _, t in rows] == ['add 12+34 = 6', 'add 12+34 = 4']
    assert round(rows[0][0], 4) == round((math.log(0.3) + math.log(0.9)) / 2, 4)


def tiny_fon(coupling='PC'):
    from fon import FON, FONConfig
    torch.manual_seed(0)
    return FON(FONConfig(block_size=32, vocab_size=len(CHARS) + 1, n_layer=1, n_embd=16, n_taps=4, max_delay=7,
                         pos_kernel=3, ripple_widths=(2, 4), addr_window=4, coupling=coupling)).eval()


def test_fon_ranks_candidates_through_its_holes(monkeypatch, capsys):
    """Each candidate becomes as many holes as it has tokens; its score is the mean log-probability
    of its tokens at those holes, from the revision organ's logits."""
    model, V = tiny_fon(), len(CHARS)
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add [MASK] 1', '--candidates=xx|y'], V) == 0
    head, rows = ranked(capsys.readouterr().out)
    assert 'holes' in head and sorted(t for _, t in rows) == ['add xx 1', 'add y 1']
    enc = [CHARS.index(c) for c in 'add ']
    for cand in ('xx', 'y'):
        ids = torch.tensor([enc + [V] * len(cand) + [CHARS.index(c) for c in ' 1']])
        holes = ids == V
        with torch.no_grad():
            lp = torch.log_softmax(model(ids, holes=holes)[0][holes].float(), -1)
        want = lp[torch.arange(len(cand)), [CHARS.index(c) for c in cand]].sum().item() / len(cand)
        assert abs(dict((t, s) for s, t in rows)[f'add {cand} 1'] - want) < 1e-3


def test_fon_fills_span_tokens_per_marker(monkeypatch, capsys):
    model, V = tiny_fon(), len(CHARS)
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add [MASK] 1[MASK]', '--span_tokens=3',
                                            '--num_samples=2'], V) == 0
    fills = [s.strip('\n') for s in capsys.readouterr().out.split('---------------') if s.strip()]
    assert len(fills) == 2 and all(len(f) == len('add  1') + 6 and f.startswith('add ') for f in fills)
    assert all(set(f) <= set(CHARS) for f in fills)                           # never the MASK itself
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add [MASK] 1'], V) == 0
    assert len(capsys.readouterr().out.split('\n')[0]) == len('add  1') + 1    # one hole per marker by default


@pytest.mark.parametrize('argv,msg', [
    (['--candidates=x|Z'], "candidate 'Z' cannot be encoded with the char tokenizer"),
    (['--num_candidates=4'], "num_candidates does not apply to FON's infill without --candidates"),
    (['--candidates=x', '--span_tokens=2'], 'span_tokens does not apply to infill with --candidates'),
    (['--coupling=AR'], 'coupling=AR runs the drafting stream only'),
    (['--holes=True'], 'holes is not set by hand'),
])
def test_fon_infill_refuses_what_it_does_not_do(monkeypatch, capsys, argv, msg):
    model = tiny_fon()
    assert sample_main(monkeypatch, model, ['--infill=True', '--start=add [MASK] 1', *argv], len(CHARS)) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count('\n') == 1, err
