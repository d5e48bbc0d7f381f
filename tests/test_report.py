"""tools.report: a run's log.jsonl as a PNG, and a bad log refused in one line."""
import json

import pytest

from tools import report


def write_log(path, recs, tail=''):
    path.write_text(''.join(json.dumps(r) + '\n' for r in recs) + tail)


def small_log():
    recs = [{'kind': 'eval', 'iter': 0, 'train_loss': 4.2, 'val_loss': 4.3, 'tokens': 0}]
    recs += [{'kind': 'train', 'iter': i, 'loss': 4.2 - 0.1 * i, 'lr': 1e-3 * min(1, (i + 1) / 5), 'ms': 10.0}
             for i in range(20)]
    return recs + [{'kind': 'eval', 'iter': 20, 'train_loss': 2.1, 'val_loss': 2.3, 'tokens': 20 * 256}]


def test_writes_a_png_of_loss_and_lr_against_tokens(tmp_path, monkeypatch):
    import matplotlib.image
    import matplotlib.pyplot as plt
    write_log(tmp_path / 'log.jsonl', small_log(), tail='{"kind": "tra')   # a last line cut short by a kill
    (tmp_path / 'config.json').write_text(json.dumps({'batch_size': 4, 'block_size': 16, 'gradient_accumulation_steps': 4}))
    drawn = {}
    savefig = plt.Figure.savefig

    def spy(fig, *a, **kw):   # what is on the axes when it is saved
        drawn.update({ax.get_ylabel(): [line.get_xydata().tolist() for line in ax.get_lines()] for ax in fig.axes})
        drawn['xlabel'] = fig.axes[1].get_xlabel()
        return savefig(fig, *a, **kw)
    monkeypatch.setattr(plt.Figure, 'savefig', spy)
    report.main([f'--out_dir={tmp_path}'])
    png = tmp_path / 'curves.png'
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    img = matplotlib.image.imread(png)
    assert img.shape[0] > 400 and img.shape[1] > 400 and img.std() > 0
    train, ev_train, ev_val = drawn['loss (nats/token)']
    assert train[3] == [3 * 256, pytest.approx(3.9)] and len(train) == 20     # 256 tokens per iteration
    assert ev_val == [[0, 4.3], [20 * 256, 2.3]] and ev_train == [[0, 4.2], [20 * 256, 2.1]]
    assert drawn['lr'][0][0] == [0, pytest.approx(2e-4)] and drawn['xlabel'] == 'tokens'


@pytest.mark.parametrize('log,msg', [
    (None, 'log.jsonl is a folder'),
    ('missing', 'log.jsonl is not there'),
    ('{"kind": "train", "iter": 0, "loss": 1.0}\nnot json\n{"kind": "train", "iter": 1, "loss": 1.0}\n',
     "log.jsonl line 2 is not a train.py log record"),
    ('[1, 2]\n{"kind": "train", "iter": 0, "loss": 1.0}\n', 'line 1 is not a train.py log record'),
    ('{"kind": "eval", "iter": 0, "train_loss": 1.0, "val_loss": 1.0}\n', 'holds no training records yet'),
])
def test_a_bad_log_is_one_line(tmp_path, capsys, log, msg):
    if log is None:
        (tmp_path / 'log.jsonl').mkdir()
    elif log != 'missing':
        (tmp_path / 'log.jsonl').write_text(log)
    with pytest.raises(SystemExit) as e:
        report.main([f'--out_dir={tmp_path}'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith('error: ') and err.count('\n') == 1 and msg in err, err
    assert not (tmp_path / 'curves.png').exists()
