"""python -m tools.results PAPER [--seeds=N] [--iters=N] [--jobs=N] [--fresh] [--rebuild]: the options read
into one Options, the paper's data checked, its function run, its tables written."""
import os
import signal
import subprocess
import sys

from battery import DATASETS
from configurator import stop_on_signals
import tools.results
from tools.results.battery import battery
from tools.results.depth import depth
from tools.results.fon import fon
from tools.results.parcae import parcae
from tools.results.pool import ROOT, fail
from tools.results.runner import Lab, Options, Unrecorded
from tools.results.spec import PAPERS
from tools.results.tables import write
from tools.results.textnca import textnca
from tools.results.workspace import workspace

# each paper's function: trains its runs, scores them, returns (rows, figure, Markdown)
PAPER_FUNCTIONS = {'textnca': textnca, 'parcae': parcae, 'workspace': workspace, 'fon': fon, 'depth': depth,
                   'battery': battery}
FLAGS = ('--fresh', '--rebuild')
VALUED = ('--seeds', '--iters', '--jobs')


def parse(argv):
    """(paper, seeds, Options) from the command line; a bad one is one line naming what is accepted."""
    usage = (f"usage: python -m tools.results {{{'|'.join(PAPERS)}}} [--seeds=N] [--iters=N] [--jobs=N] [--fresh] "
             "[--rebuild]")
    bad = [a for a in argv if a.startswith('-') and a not in FLAGS
           and (a.split('=', 1)[0] not in VALUED or '=' not in a)]
    if bad:
        fail((f"{bad[0]} takes a value: {bad[0]}=N" if bad[0] in VALUED else f"unknown option {bad[0]!r}")
             + f" ({usage})")
    opts = dict(a[2:].split('=', 1) for a in argv if a.startswith('--') and a not in FLAGS)
    papers = [a for a in argv if not a.startswith('-')]
    if len(papers) != 1 or papers[0] not in PAPERS:
        fail((f"unknown paper {next(p for p in papers if p not in PAPERS)!r}" if set(papers) - set(PAPERS) else
              "name one paper" if not papers else f"one paper at a time, got {' '.join(papers)}") + f" ({usage})")
    for k in ('seeds', 'iters', 'jobs'):
        if k in opts and not (opts[k].isdigit() and int(opts[k]) >= (k != 'iters')):
            fail(f"--{k} must be a whole number{' >= 1' if k != 'iters' else ''}, got {opts[k]!r}")
    if '--fresh' in argv and '--rebuild' in argv:
        fail(f"--fresh trains what the records hold, --rebuild reads only them: one or the other ({usage})")
    paper = papers[0]
    return paper, int(opts.get('seeds', PAPERS[paper]['seeds'])), Options(
        jobs=int(opts.get('jobs', Options.jobs)), iters=int(opts.get('iters', 0)), fresh='--fresh' in argv,
        rebuild='--rebuild' in argv)


def check_data(paper, root=ROOT):
    for dataset, prepare in PAPERS[paper].get('datasets', [('shakespeare_char', 'shakespeare_char')]):
        if not os.path.isfile(os.path.join(root, 'data', dataset, 'train.bin')):
            fail(f"no data/{dataset}: run python prepare_data.py {prepare} first"
                 + ('' if dataset in DATASETS else ' (offline: add --input path/to/input.txt)'))
        if '--n_test' in prepare and not os.path.isfile(os.path.join(root, 'data', dataset, 'test.bin')):
            fail(f"data/{dataset} has no test split, which the tables read: run python prepare_data.py {prepare} "
                 "(its train and val stay as they are)")


def run(paper, seeds, lab):
    """The paper's runs, trained (or read from their records) and reported in results/<paper>.*."""
    try:
        rows, fig, extra = PAPER_FUNCTIONS[paper](lab, seeds)
    except KeyboardInterrupt:
        print(f"interrupted: finished runs stay in {os.path.dirname(lab.run_dir(paper, 'x', 0))}/ "
              f"and the same command resumes the rest", file=sys.stderr)
        sys.exit(130)
    except Unrecorded as e:     # the first, once: the other threads stopped at it
        fail(str(e))
    except subprocess.CalledProcessError as e:   # the run's own error line is above this one
        fail(f"{' '.join(e.cmd[1:3])} ... stopped (exit {e.returncode}); the same command resumes from the runs "
             f"that finished once that is mended")
    write(lab, paper, rows, fig, extra, seeds)


def main(argv, root=ROOT, signals=False):
    """The command. signals: SIGTERM, SIGHUP and Ctrl-C stop the train.py runs it started too (each says where
    it got to), and its threads start no other."""
    if '-h' in argv or '--help' in argv:   # before anything starts: the usage is the package's docstring
        print(tools.results.__doc__.strip())
        return
    paper, seeds, opts = parse(argv)
    if not opts.rebuild:    # the records alone need no data
        check_data(paper, root)
    lab = Lab(opts)
    if signals:
        stop_on_signals(lab.stop)
        signal.signal(signal.SIGINT, lab.interrupt)
    run(paper, seeds, lab)
