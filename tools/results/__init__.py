"""
Each paper's claim at a scale a CPU can run: tiny Shakespeare characters (bytes for the workspace, the
synthetic battery for FON's Table 8), the CPU demos' recipes (the runs are config/results/<paper>/*.py),
from ten minutes to a few hours per paper on 2 cores. One command per paper trains the
models its claim needs (train.py runs under out-results/<paper>/; a finished run is reused, a killed one
resumed), scores them with eval.py on the whole validation stream and writes results/<paper>.md (the
tables) and results/<paper>.png (the curves).

    python prepare_data.py shakespeare_char      # offline: --input path/to/input.txt
    python prepare_data.py shakespeare --tokenizer byte   # the workspace's bytes (offline: the same --input)
    python prepare_data.py synthetic             # the battery (offline)
    python -m tools.results textnca     # ~80 min: schedules, SWin-TF-Staged/6L, Transformer-6L, Ts sweep, Eq. 1
    python -m tools.results parcae      # ~110 min: Table 2 with the base RDM; Parcae vs GPT 6L/12L and mu=1 on
                                        # Table 21's recipe, on characters and the battery; L(T) forms;
                                        # Parcae vs GPT 6L at a second size (40 of the 110)
    python -m tools.results workspace   # ~2.5-3 h: Table 3's six rows, seeds 11/23/37, bits per byte, each at
                                        # its own rate, at two sizes (100 runs, 302 CPU-minutes of training)
    python -m tools.results fon         # FON vs Mamba2 vs Transformers at two sizes, each at its own rate, the
                                        # tied head, length extrapolation (~5 CPU-hours), then Table 5's infill
                                        # arms, three seeds (~4 CPU-hours more: 2.6 training, 1.5 reading)
    python -m tools.results battery     # ~45 min: Table 8 with a BERT-style encoder, far future tasks, Table 5's
                                        # arms on ind_r and mem_r, three seeds
    python -m tools.results depth       # the depth gate: GPT 3L vs 6L on the hops task, each rate bracketed on
                                        # seed 1337, then five reported seeds read on a test split (a run 20-75
                                        # min 3L, 80-150 min 6L); then the looped models' pairs (Parcae's,
                                        # TextNCA's with the residual gate, the workspace's; TextNCA's GRU pair
                                        # stops after its one-hop stages): ~55 CPU-hours in all

--seeds=N overrides a paper's seed count, --iters=N its iterations (for a quick look, not the table).
Two runs train at once, one thread each (--jobs=N: N at once, one a core); the wall times in the tables
are theirs, so time them at one job a core. Ctrl-C, a SIGTERM or a run that fails stops every run the
command started and starts no other; the same command resumes each from its last checkpoint.

Every finished run appends its record to results/runs/<paper>.jsonl (one JSON line: its config, command,
eval readings and val curve; no checkpoint), committed with the tables: in a fresh clone the command
rebuilds each table from the records and trains only the runs they lack (a run whose checkpoint another
needs is trained again from its record's arguments, to the same weights at one thread). --rebuild makes
the tables from the records alone (no data, no training; a run without a record is an error; the depth
tables list what is recorded and leave the rest pending). --fresh
ignores the records and trains every run out-results/ lacks; delete a run's lines to train it again.
"""
