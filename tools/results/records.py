"""Run records: every run a results command finishes, kept in results/runs/<paper>.jsonl, one JSON line a
record (git stores appended text lines well, where it would store a rewritten blob whole each time).

A line is {"run": its folder under out-results/ ("textnca-small/Transformer_6L-s1337"), and what it brings}:
"config" (train.py's config.json), "done" (wall time, the exact train.py arguments), "eval" (eval.py's
readings, {path under the run's eval/: JSON}) and "log" (train.py's log.jsonl thinned to what the tables and
figures read: every eval record; the train records only where the paper reads them, the stability table's
loss and loop statistics). A line with "done" is the run trained (anew: it replaces what earlier lines held);
a line without it adds readings to the run's record. No checkpoint: a run that another needs the weights
of is trained again from its recorded arguments."""
import json
import os
import threading

TRAIN_KEYS = ('kind', 'iter', 'loss', 'spectral_radius', 'state_norm', 'singular_value')


def paper_of(run):
    """The paper a run folder belongs to: 'fon-small/FON_PC-s1337' -> 'fon'."""
    return run.split('/')[0].split('-')[0]


def thin(log, train_log):
    """A train.py log as a record keeps it: its eval records, and its train records' TRAIN_KEYS where
    train_log (the paper's stability table reads every one of them)."""
    keep = []
    for r in log:
        if r.get('kind') == 'eval':
            keep.append(r)
        elif r.get('kind') == 'train' and train_log:
            keep.append({k: r[k] for k in TRAIN_KEYS if k in r})
    return keep


def read_folder(out, train_log):
    """A finished run's folder as a record: its config, done, eval readings and thinned log."""
    rec = {}
    for name in ('config', 'done'):
        path = os.path.join(out, f'{name}.json')
        if os.path.isfile(path):
            rec[name] = json.load(open(path))
    evals = {}
    for root, _, files in os.walk(os.path.join(out, 'eval')):
        for f in sorted(files):
            if f.endswith('.json'):
                path = os.path.join(root, f)
                evals[os.path.relpath(path, os.path.join(out, 'eval')).replace(os.sep, '/')] = json.load(open(path))
    rec['eval'] = evals
    log = os.path.join(out, 'log.jsonl')
    if os.path.isfile(log):
        rec['log'] = thin([json.loads(line) for line in open(log) if line.strip()], train_log)
    return rec


def write_folder(rec, out, write_text):
    """A record's files written into a run folder (a fresh clone's out-results/), no checkpoint."""
    def write(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_text(path, text)
    for name in ('config', 'done'):
        if name in rec:
            write(os.path.join(out, f'{name}.json'), json.dumps(rec[name]))
    for rel, data in rec.get('eval', {}).items():
        write(os.path.join(out, 'eval', *rel.split('/')), json.dumps(data))
    if 'log' in rec:
        write(os.path.join(out, 'log.jsonl'), ''.join(json.dumps(r) + '\n' for r in rec['log']))


class Records:
    """The records under folder (results/runs/), read once per paper, appended to as runs finish."""

    def __init__(self, folder):
        self.folder, self.papers, self.lock = folder, {}, threading.Lock()

    def path(self, paper):
        return os.path.join(self.folder, f'{paper}.jsonl')

    def load(self, paper):
        if paper not in self.papers:
            runs = {}
            path = self.path(paper)
            for line in open(path) if os.path.isfile(path) else []:
                merge(runs, json.loads(line))
            self.papers[paper] = runs
        return self.papers[paper]

    def get(self, run):
        """The record of a run folder ('textnca/Ts_8-s1337'); None where there is none."""
        return self.load(paper_of(run)).get(run)

    def keep(self, run, rec):
        """Appends what rec (a folder's record) adds to the run's: all of it once it is trained anew (its done
        changed), else the readings the record lacks or holds otherwise; nothing where it holds them all."""
        with self.lock:
            have = self.get(run)
            if have is None or same(have.get('done')) != same(rec.get('done')):
                line = {'run': run, **rec}
            else:
                new = {k: v for k, v in rec['eval'].items() if same(have['eval'].get(k)) != same(v)}
                if not new:
                    return
                line = {'run': run, 'eval': new}
            os.makedirs(self.folder, exist_ok=True)
            with open(self.path(paper_of(run)), 'a') as f:
                f.write(json.dumps(line, separators=(',', ':')) + '\n')
            merge(self.load(paper_of(run)), line)


def same(x):    # what a comparison reads: NaN (a diverged run's time) equal to itself
    return json.dumps(x, sort_keys=True)


def merge(runs, line):
    """One record line into {run: record}: a trained run replaces the record, readings add to it."""
    run, rec = line['run'], {k: v for k, v in line.items() if k != 'run'}
    if 'done' in rec or run not in runs:
        runs[run] = {'eval': {}, **rec}
    else:
        runs[run]['eval'].update(rec.get('eval', {}))
