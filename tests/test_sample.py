"""sample.py end to end from a trained checkpoint: generation, prompts, knobs, infill, errors; and
generate() on tiny models: O(1)-state decoding at any length, the crop of a learned position table."""
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


def test_causal_infill_ranks_the_fitting_span_first(trained):
    p = run_script('sample.py', f'--out_dir={trained}', '--infill=True', '--start=the cat [MASK] on a mat.',
                   '--candidates=sat|ddd|ttt', '--num_samples=3')
    lines = [ln for ln in p.stdout.splitlines() if ln.strip() and not ln.startswith('---')]
    assert lines[0].split(None, 1)[1] == 'the cat sat on a mat.'
    p = run_script('sample.py', f'--out_dir={trained}', '--infill=True', '--start=the [MASK] sat',
                   '--num_candidates=4', '--num_samples=2')
    assert p.stdout.count('---------------') == 2


@pytest.mark.parametrize('args,msg', [
    (['--start=hello ZEBRA'], 'cannot be encoded with the char tokenizer'),
    (['--num_recur=4'], 'unknown key(s) num_recur'),
    (['--start=FILE:/nonexistent.txt'], 'prompt file not found'),
    (['--infill=True', '--start=no marker'], "needs the marker '[MASK]'"),
    (['--temperature=hot'], "config key 'temperature' expects float"),
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
