import pytest

from configurator import ConfigError, check, parse_args


def test_file_then_overrides(tmp_path):
    f = tmp_path / 'c.py'
    f.write_text("import math\nbatch_size = 4\nlearning_rate = 1e-3\nwindows = [8, 32]\n_private = 1\n")
    given = parse_args([str(f), '--batch_size=8', '--dataset=shakespeare_char', '--compile=False'])
    assert given == {'batch_size': 8, 'learning_rate': 1e-3, 'windows': [8, 32],
                     'dataset': 'shakespeare_char', 'compile': False}
    out = check(given, {'batch_size': 1, 'learning_rate': 0.1, 'windows': (), 'dataset': 'x', 'compile': None})
    assert out['windows'] == (8, 32)


def test_int_promotes_to_float():
    assert check({'lr': 1}, {'lr': 0.5}) == {'lr': 1.0}


@pytest.mark.parametrize('argv,known,msg', [
    (['--lerning_rate=1'], {'learning_rate': 0.1}, "unknown config key 'lerning_rate' (did you mean: learning_rate?)"),
    (['--max_iters=1.5'], {'max_iters': 1}, "config key 'max_iters' expects int (default 1), got float 1.5"),
    (['--compile=1'], {'compile': True}, "config key 'compile' expects bool"),
    (['--batch_size'], {'batch_size': 1}, "expected --key=value, got '--batch_size'"),
    (['nope/missing.py'], {}, 'config file not found: nope/missing.py'),
])
def test_errors_are_one_clear_line(argv, known, msg):
    with pytest.raises(ConfigError) as e:
        check(parse_args(argv), known)
    assert msg in str(e.value) and '\n' not in str(e.value)


def test_broken_config_file_names_itself(tmp_path):
    f = tmp_path / 'bad.py'
    f.write_text("batch_size = undefined_name\n")
    with pytest.raises(ConfigError, match='bad.py failed to run: NameError'):
        parse_args([str(f)])


def test_base_files_are_read_first_relative_to_the_config(tmp_path, monkeypatch):
    (tmp_path / 'recipe').mkdir()
    (tmp_path / 'recipe' / 'r.py').write_text("batch_size = 4\nlearning_rate = 1e-3\nseed = 1\n")
    (tmp_path / 'main.py').write_text("base = 'recipe/r.py'\nbatch_size = 8\nwindows = (8, 32)\n")
    (tmp_path / 'other.py').write_text("seed = 2\ndropout = 0.1\n")
    (tmp_path / 'ablation.py').write_text("base = ('main.py', 'other.py')\nwindows = (4,)\n")
    monkeypatch.chdir(tmp_path / 'recipe')  # a base names a file beside its config, not in the cwd
    given = parse_args([str(tmp_path / 'ablation.py'), '--seed=3'])
    assert given == {'batch_size': 8, 'learning_rate': 1e-3, 'seed': 3, 'windows': (4,), 'dropout': 0.1}
    assert parse_args([str(tmp_path / 'ablation.py')])['seed'] == 2   # later bases win over earlier ones


@pytest.mark.parametrize('files,msg', [
    ({'a.py': "base = 'gone.py'\n"}, "config file not found: {d}/gone.py (the base of {d}/a.py)"),
    ({'a.py': "base = 'b.py'\n", 'b.py': "base = 'a.py'\n"},
     "config files name each other as base in a cycle: {d}/a.py -> {d}/b.py -> {d}/a.py"),
    ({'a.py': "base = 3\n"}, "{d}/a.py: base must be a config file name or a tuple of them, got 3"),
])
def test_base_errors_are_one_line(tmp_path, files, msg):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as e:
        parse_args([str(tmp_path / 'a.py')])
    assert str(e.value) == msg.format(d=tmp_path)


def test_every_config_file_is_valid():
    """Each config file (config/ and its folders) names a model and only keys that train.py or that model knows."""
    import glob
    import os
    from train import resolve_config
    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), '..', 'config', '**', '*.py'), recursive=True))
    assert files
    for f in files:
        cfg = resolve_config([f])
        assert cfg['model'] in ('gpt', 'mamba2', 'parcae', 'textnca', 'fon', 'workspace'), f


def test_every_config_file_names_its_own_out_dir():
    """out-<config name> (config/textnca/textnca_k2.py -> out-textnca_k2), a sibling of the default run's
    out/ as in nanoGPT, so no run folder holds another; the results runs, whose names repeat across
    papers, out-results/<paper>/<name>. The recipes under config/recipe/ are no runs."""
    import glob
    import os
    root = os.path.join(os.path.dirname(__file__), '..', 'config')
    files = glob.glob(os.path.join(root, '**', '*.py'), recursive=True)
    for f in files:
        rel = os.path.relpath(f, root)[:-3]
        if rel.startswith('recipe' + os.sep):
            continue
        ns = {}
        exec(open(f).read(), ns)
        name = rel.replace(os.sep, '/') if rel.startswith('results' + os.sep) else os.path.basename(rel)
        assert ns.get('out_dir') == 'out-' + name, f


def test_help_prints_the_scripts_usage():
    from conftest import run_script
    for script, first in [('train.py', 'The one trainer'), ('sample.py', 'Generate or infill'),
                          ('tools.eval', 'Evaluate a checkpoint')]:
        p = run_script(script, '--help', module=script.startswith('tools.'))
        assert p.stdout.startswith(first) and '--key=value' not in p.stderr
