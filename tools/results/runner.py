"""The runner: train.py runs into out-results/<paper>/ (a finished run is reused, a killed one resumed),
eval.py readings of them, and each run's record (records.py) kept as it finishes and read back where
out-results/ lacks the run (a fresh clone)."""
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from tools.report import write_text
from tools.results.pool import PY, ROOT, Pool, fail
from tools.results.records import Records, paper_of, read_folder, same, write_folder
from tools.results.spec import PAPERS


class Unrecorded(Exception):
    """A run or reading that --rebuild would need to train or read."""


@dataclass
class Options:
    jobs: int = 2          # train.py runs at once, one thread each (--jobs)
    iters: int = 0         # --iters: a quick look in its own folder, never mixed with the full runs
    fresh: bool = False    # --fresh: train what out-results/ lacks, records unread
    rebuild: bool = False  # --rebuild: the tables from the records alone; a run without one is an error
    out: str = 'out-results'                          # the run folders (relative: they are named in the tables)
    records: str = os.path.join('results', 'runs')    # <paper>.jsonl
    results: str = os.path.join(ROOT, 'results')      # <paper>.md, .json, .png


def read_log(out):
    path = os.path.join(out, 'log.jsonl')
    if os.path.exists(path) and not os.path.isfile(path):
        fail(f"{path} is not a file: a run's log is the file train.py appends to; move that aside")
    return [json.loads(line) for line in open(path)] if os.path.isfile(path) else []


def val_curve(out):
    return [(r['iter'], r['val_loss']) for r in read_log(out) if r.get('kind') == 'eval']


def init_source(args):
    """The run whose weights train.py arguments start from (--init_from, not resume); None: from scratch."""
    return next((a[len('--init_from='):] for a in args if a.startswith('--init_from=') and a != '--init_from=resume'),
                None)


def trained_otherwise(out, args):
    """How the finished run in out differs from the one args ask for: other starting weights (--init_from)
    or another rate (--learning_rate), where args name them; None where it is that run, or there is none."""
    path = os.path.join(out, 'done.json')
    return differs(json.load(open(path)), args) if os.path.isfile(path) else None


def differs(done, args):
    """How the run a done.json describes differs from the one args ask for (trained_otherwise)."""
    argv = done.get('argv') or done['command'].split()
    src = init_source(args)
    if src is not None and f'--init_from={src}' not in argv:
        return f'from another run than {src}'
    asked, had = (next((a for a in reversed(v) if a.startswith('--learning_rate=')), None) for v in (args, argv))
    if asked is not None and asked != had:
        return f"at another rate than {asked[len('--learning_rate='):]}"
    return None


class Lab(Pool):
    """A results command's runs under one set of Options."""

    def __init__(self, opts=None):
        self.opts = opts or Options()
        super().__init__(self.opts.jobs)
        self.records = Records(self.opts.records)

    def run_dir(self, paper, name, seed):
        slug = '_'.join(''.join(c if c.isalnum() else ' ' for c in name).split())
        iters = f'-iters{self.opts.iters}' if self.opts.iters else ''
        return os.path.join(self.opts.out, paper + iters, f'{slug}-s{seed}')

    def record_of(self, out):
        """The record name of a run folder under out-results/ ('textnca/Ts_8-s1337'); None for one elsewhere
        or a quick --iters look."""
        rel = os.path.relpath(out, self.opts.out)
        return None if self.opts.iters or rel.startswith('..') else rel.replace(os.sep, '/')

    def held_otherwise(self, out, args):
        """How the run that out holds, in its folder or else in its record, differs from the one args ask for
        (trained_otherwise); None where it is that run, or there is none."""
        run = None if self.opts.fresh else self.record_of(out)
        rec = self.records.get(run) if run else None
        if os.path.isfile(os.path.join(out, 'done.json')) or not {'argv', 'command'} & set((rec or {}).get('done', {})):
            return trained_otherwise(out, args)
        return differs(rec['done'], args)

    def keep(self, out):
        """A finished run's record appended to results/runs/<paper>.jsonl (what it adds to the record there)."""
        run = self.record_of(out)
        if run is not None and not self.opts.rebuild:
            self.records.keep(run, read_folder(out, PAPERS.get(paper_of(run), {}).get('train_log', False)))

    def restore(self, out, args):
        """A run that its record holds and out-results/ does not (a fresh clone): the record's files written
        back, the checkpoint left to ensure_ckpt(). A killed run's checkpoint resumes instead, and a record
        trained with other arguments than args is not used (a line says so; the run trains again). A folder
        restored before (no checkpoint) takes the readings recorded since; one that holds another run than the
        record (trained again elsewhere, or records checked out from another commit) is refused, not rewritten."""
        run = self.record_of(out)
        rec = None if run is None or self.opts.fresh else self.records.get(run)
        done = os.path.join(out, 'done.json')
        if rec is None or 'done' not in rec or os.path.isfile(os.path.join(out, 'ckpt.pt')):
            return
        if os.path.isfile(done):
            if same(json.load(open(done))) != same(rec['done']):    # keep() would append it over the record
                fail(f"{out} holds another run than its record in {self.records.path(paper_of(run))}: move the "
                     "folder aside to read the record")
            write_folder({'eval': rec.get('eval', {})}, out, write_text)
            return
        if rec['done'].get('argv', [])[1:1 + len(args)] != list(args):
            print(f"{run}'s record was trained with other arguments than {' '.join(args)}: trained again", flush=True)
            return
        write_folder(rec, out, write_text)

    def refuse(self, out, what):
        """Under --rebuild, what would train or read a run raises Unrecorded (main() says it in one line)."""
        if self.opts.rebuild:
            raise Unrecorded(f"{out} has no record {what}: --rebuild reads the records only (without it the "
                             "command trains and reads what they lack)")

    def ensure_ckpt(self, out):
        """The checkpoint of a restored run, which a fine-tune, a later stage or a new reading needs: the run
        trained again from its recorded arguments (and any run it started from), which at one thread on
        the same CPU gives the same weights; a line says so where its last eval differs from the record's.
        Until that run ends its folder holds a marker: a checkpoint beside it is a killed retrain's, resumed."""
        ckpt, marker = os.path.join(out, 'ckpt.pt'), os.path.join(out, 'retraining.json')
        if os.path.isfile(ckpt) and not os.path.isfile(marker):
            return
        self.refuse(out, 'of the reading asked for (its checkpoint would be trained again)')
        done = json.load(open(os.path.join(out, 'done.json')))
        if 'argv' not in done:
            fail(f"{out} has no checkpoint and its done.json no arguments to train it again with: move it aside")
        argv = [a for a in done['argv'] if a != '--init_from=resume']
        if init_source(argv):
            self.ensure_ckpt(init_source(argv))
        if os.path.isfile(marker):    # the record's last eval, kept before the retrain's log replaced it
            was, how = [tuple(p) for p in json.load(open(marker))], '--init_from=resume'
        else:
            was, how = val_curve(out)[-1:], '--overwrite=True'
            write_text(marker, json.dumps(was))
        print(f"{out}: a recorded run without its checkpoint, trained again for it", flush=True)
        self.run_with_progress([PY, *argv, how], out)
        t = os.stat(ckpt).st_mtime_ns + 10 ** 6    # a file's clock ticks coarsely: a millisecond past the checkpoint
        for root, _, files in os.walk(os.path.join(out, 'eval')):    # the record's readings stay the run's: newer
            for f in files:                                           # than the checkpoint, eval_json keeps them
                os.utime(os.path.join(root, f), ns=(t, t))
        now, run = val_curve(out)[-1:], self.record_of(out)
        rec = self.records.get(run) if run else None
        if now != was:    # another CPU's or build's rounding: the readings now read other weights than the record's
            print(f"warning: {out} trained again ends at {now}, its record at {was}: its readings read these "
                  f"weights (eval/retrain.json says so), its curve stays the record's", file=sys.stderr, flush=True)
            os.makedirs(os.path.join(out, 'eval'), exist_ok=True)
            write_text(os.path.join(out, 'eval', 'retrain.json'), json.dumps({'record': was, 'retrained': now}))
            if rec and 'log' in rec:    # what a repeat rule reads, in the lab as in a --rebuild from the records
                write_text(os.path.join(out, 'log.jsonl'), ''.join(json.dumps(r) + '\n' for r in rec['log']))
        os.remove(marker)
        self.keep(out)

    def train(self, args, out, seed, iters=None, upto=None):
        """One train.py run into out; a finished one is kept, a killed one resumed. upto: train (or continue
        a finished run) to that iteration, a leg of a run read along the way. Returns its wall time."""
        iters = self.opts.iters if iters is None else iters
        extra = [f'--max_iters={iters}', f'--lr_decay_iters={iters}'] if iters else []
        extra += [f'--max_iters={upto}'] if upto else []
        done_path = os.path.join(out, 'done.json')
        self.restore(out, args)
        how = trained_otherwise(out, args)    # a repeated depth stage, a retrained pretraining, a recipe changed
        if how:
            fail(f'{out} was trained {how}: move it aside to train it again as asked')
        done = json.load(open(done_path)) if os.path.isfile(done_path) else None
        if done and (upto is None or done.get('upto', 0) >= upto):
            if os.path.isfile(os.path.join(out, 'retraining.json')):   # a retrain for its checkpoint, killed: its
                self.ensure_ckpt(out)                                   # log, which a repeat rule reads, is partial
            self.keep(out)
            return done['seconds']
        self.refuse(out, 'of this run' if not done else f'of its leg to {upto} iterations')
        ckpt, started = os.path.join(out, 'ckpt.pt'), os.path.join(out, 'started.json')
        if init_source(args) and not done and not os.path.isfile(ckpt):   # starts from another run's weights: a
            self.ensure_ckpt(init_source(args))                            # recorded one is trained again for them
        if done:          # a finished leg continued: its checkpoint
            self.ensure_ckpt(out)
        init = ['--init_from=resume'] if os.path.isfile(ckpt) else []
        prior = done['seconds'] if done else 0
        if init and not done and os.path.isfile(started):   # a killed run: its time up to its last checkpoint counts
            s = json.load(open(started))
            prior = s['prior'] + max(0.0, os.path.getmtime(ckpt) - s['t0'])
        cmd = [PY, 'train.py', *args, f'--out_dir={out}', f'--seed={seed}', '--always_save_checkpoint=True', *extra,
               *init]
        print(' '.join(cmd[1:]), flush=True)
        t0 = time.time()
        os.makedirs(out, exist_ok=True)
        write_text(started, json.dumps({'t0': t0, 'prior': prior}))
        self.run_with_progress(cmd, out)
        seconds = time.time() - t0 + prior
        write_text(done_path, json.dumps({'seconds': seconds, 'command': ' '.join(cmd[1:]), 'argv': cmd[1:],
                                          **({'upto': upto} if upto else {})}))
        self.keep(out)
        return seconds

    def train_or_diverge(self, args, out, seed):
        """train(), where a run that train.py stops after it started (a non-finite loss: exit 2 with a log)
        is a result, not an error. Returns (seconds, the iteration it diverged after, or None)."""
        try:
            return self.train(args, out, seed), json.load(open(os.path.join(out, 'done.json'))).get('diverged')
        except subprocess.CalledProcessError as e:
            log = [r for r in read_log(out) if r.get('kind') == 'train']
            if e.returncode != 2 or not log:
                raise
            done = {'seconds': float('nan'), 'command': ' '.join(e.cmd[1:]), 'argv': e.cmd[1:],
                    'diverged': log[-1]['iter']}
            write_text(os.path.join(out, 'done.json'), json.dumps(done))
            self.keep(out)
            return done['seconds'], done['diverged']

    def eval_json(self, out, file, *args, leg=None, sub=None):
        """eval.py on a run with any analysis; returns the JSON it wrote to out/eval/file, redone when the
        checkpoint is newer. leg: the reading of a run trained in legs, kept in out/eval/leg<N>/ (it read
        the checkpoint of that leg, which the next leg replaces). sub: a subfolder of eval/ (one per knob
        setting of the same analysis)."""
        dest = os.path.join(out, 'eval', *([f'leg{leg}'] if leg else []), *([sub] if sub else []))
        path = os.path.join(dest, file)
        ckpt = os.path.join(out, 'ckpt.pt')
        if os.path.isfile(path) and (leg or not os.path.isfile(ckpt)):    # a leg's reading, or a restored record's
            return json.load(open(path))
        # a copy of the folder can date the reading and the checkpoint alike: only a newer checkpoint is stale
        if not (os.path.isfile(path) and os.path.getmtime(path) >= os.path.getmtime(ckpt)):
            self.refuse(out, f'of eval/{os.path.relpath(path, os.path.join(out, "eval"))}')
            self.ensure_ckpt(out)
            self.check_stopping()
            subprocess.run([PY, '-m', 'tools.eval', f'--out_dir={out}', f'--out={dest}', *args], cwd=ROOT,
                           check=True, stdout=subprocess.DEVNULL, env={**os.environ, 'OMP_NUM_THREADS': '1'})
            self.keep(out)
        return json.load(open(path))

    def evaluate(self, out, *args):
        """eval.py on a run (the whole val stream unless args say otherwise); returns its JSON."""
        sweep = next((a[len('--sweep='):].split('=')[0] for a in args if a.startswith('--sweep=')), None)
        return self.eval_json(out, f'sweep_{sweep}.json' if sweep else 'stream_val.json', *args)
