"""The train.py processes a results command runs: a pool of threads, one run a thread, JOBS at once, slots
given by rank, and a stop (a signal, or a run that fails) that ends every run under way and starts no other."""
import contextlib
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repo
PY = sys.executable


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


class Pool:
    """jobs: train.py runs at once, one thread each."""

    def __init__(self, jobs=2):
        self.jobs = jobs
        self.running = set()                # the train.py processes under way, which a stop ends too
        self.stopping = threading.Event()   # set by a stop: no run starts after it
        self.slots = threading.Condition()
        self.waiting, self.held, self.live_ranks = [], [], set()   # the ranks waiting for a slot, the ranks
                                                                   # holding one; the live runs (under live())

    def stop(self):
        """A signal's stop: the train.py runs under way end (each says where it got to), and the runs still
        waiting for a slot, or queued, start none (each raises KeyboardInterrupt in its thread)."""
        self.stopping.set()
        for p in list(self.running):
            p.terminate()
        with self.slots:
            self.slots.notify_all()

    def interrupt(self, signum, frame):
        """Ctrl-C: stop() the threads' runs, then the KeyboardInterrupt main() reports."""
        self.stop()
        raise KeyboardInterrupt

    def check_stopping(self):
        if self.stopping.is_set():
            raise KeyboardInterrupt('stopping')

    def run_with_progress(self, cmd, name):
        """A train.py run whose evals ('step N: ...') are printed, prefixed by its folder (runs go in
        parallel); CalledProcessError when it fails, as subprocess.run(check=True)."""
        self.check_stopping()
        with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'}) as p:
            self.running.add(p)
            try:
                for line in p.stdout:
                    if line.startswith('step '):
                        print(f"{name}: {line.rstrip()}", flush=True)
            finally:
                self.running.discard(p)
        if p.returncode:
            raise subprocess.CalledProcessError(p.returncode, cmd)

    def run_jobs(self, run, jobs, done, threads=None):
        """done[j] = run(j) for every job j not in done yet, self.jobs at once (or `threads`), one thread each;
        the first that fails stops the others (stop()) and its error is raised."""
        todo = [j for j in dict.fromkeys(jobs) if j not in done]
        with ThreadPoolExecutor(threads or self.jobs) as pool:
            futures = [pool.submit(run, j) for j in todo]
            for f in as_completed(futures):
                if f.exception() is not None:    # now, not after the hours of runs under way or queued
                    for other in futures:
                        other.cancel()
                    raise self.failure(futures, f.exception())
        done.update((j, f.result()) for j, f in zip(todo, futures))

    def failure(self, futures, e):
        """Once e ended a thread: stop() the others, and the error to raise, the first of the futures' that is
        not the KeyboardInterrupt the stop raised in them (e where there is none, as after Ctrl-C)."""
        self.stop()
        errors = (f.exception() for f in futures if not f.cancelled())    # each ends at once, stopped
        return next((x for x in errors if x is not None and not isinstance(x, KeyboardInterrupt)), e)

    def free_for(self, rank):
        """The slots free to rank: self.jobs less those held and one kept for each live run of a lower rank
        that neither waits nor holds one (between two of its own steps: its next is a moment away)."""
        asking = {r[0] for r in self.waiting + self.held}
        return self.jobs - len(self.held) - len({n for n in self.live_ranks if n < rank[0] and n not in asking})

    @contextlib.contextmanager
    def slot(self, rank):
        """One of self.jobs runs at a time; a slot goes to the waiting run of the lowest rank."""
        with self.slots:
            self.waiting.append(rank)
            self.slots.wait_for(lambda: self.stopping.is_set() or self.free_for(rank) > 0 and min(self.waiting) == rank)
            self.waiting.remove(rank)
            self.check_stopping()
            self.held.append(rank)
            self.slots.notify_all()    # the next rank may take a slot still free
        try:
            yield
        finally:
            with self.slots:
                self.held.remove(rank)
                self.slots.notify_all()

    @contextlib.contextmanager
    def live(self, n):
        """Run n's steps under way (its rate bracket, then its seeds): slot() keeps a slot for it between them."""
        with self.slots:
            self.live_ranks.add(n)
        try:
            yield
        finally:
            with self.slots:
                self.live_ranks.discard(n)
                self.slots.notify_all()
