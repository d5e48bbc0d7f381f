"""
eval.py's hole-filling analyses: how well a checkpoint fills what is missing.

--infill: holes made with data.make_holes on the val eval set (every sequence holed, the
checkpoint's hole_stride and p_hole); full-vocabulary argmax hit rate at the holes (holes= passed
when forward takes it), against two no-hole readings of the token p: the same model's argmax at
p-1 on the un-holed input (it reads the other holes' true tokens), and the checkpoint without
hole fine-tuning (--baseline_from, default the run's init_from) at p-1 on the holed input, the
LM prior, the paper's baseline; holes at position 0 are left out of all three. A causal model's
analysis: a checkpoint trained with causal=False is refused (its hole loss is eval.py's score).
--battery: the synthetic battery (battery.TASKS: FON's Table 8 six, its five future-dependent
tasks and their far variants), in fill mode (the answer's tokens set to the MASK id, argmax at
each) and by greedy generation after the prompt, exact match per task against its chance. A GPT
trained with causal=False (train.py: a BERT-style masked-reconstruction encoder, Table 8's
bidirectional column) is read in fill mode with full attention only: it is not a generator, so
it has no generate reading. A causally trained GPT's fill reads the MASK positions causally.
With --compare a b c: one table of every run's fill readings, Table 8's layout (FON, the
Transformer causal and bidirectional, Mamba2).
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

import configurator
import run_folder
from battery import CHANCE, DATASETS, FAR, FUTURE, NEAR, TASKS, TEST_SEED_OFFSET, VAL_SEED_OFFSET, encode_example, synthetic_examples, synthetic_split
from configurator import ConfigError
from data import make_holes, read_meta
from prepare_data import get_tokenizer
from tools.report import axes, save_figure, write_json


def pretrained_model(ev):
    """(model, note): the checkpoint without hole fine-tuning, the paper's no-hole baseline:
    --baseline_from, else the run's init_from when it names a folder with a ckpt.pt."""
    path = ev.opt['baseline_from'] or ev.tcfg.get('init_from', '')
    if path in ('', 'scratch', 'resume'):
        return None, 'the run was not fine-tuned from another checkpoint (set --baseline_from)'
    if not os.path.isfile(os.path.join(path, 'ckpt.pt')):
        return None, f'no checkpoint at {path} (set --baseline_from)'
    model, _ = run_folder.load_checkpoint(path, ev.dev)
    if ev.mask_id >= model.config.vocab_size:
        return None, f'the model at {path} has no row for the MASK id {ev.mask_id}'
    return model.eval(), path


@torch.no_grad()
def run_infill(ev):
    if not ev.causal:
        raise ConfigError("--infill compares a causal model's fill with its own prefix readings; this checkpoint "
                          "was trained with causal=False (full attention): its hole loss is eval.py's score, "
                          "its fill the --battery")
    if ev.mask_id >= ev.vocab:
        raise ConfigError(f"the model has {ev.vocab} embedding rows, no row for the MASK id {ev.mask_id}, and a "
                          f"fine-tune cannot add one: train with holes from the start (train.py --p_fill=0.5 sizes "
                          f"the vocabulary for the MASK id)")
    pre, pre_note = pretrained_model(ev)
    hit = unholed = prior = n = 0
    hole_nll = 0.0
    for k in range(ev.tcfg['eval_iters']):
        x, y, _ = ev.eval_batch(ev.opt['split'], k)
        g = ev.generator('infill', k)
        _, _, holes = make_holes(x, y, ev.mask_id, g, 1.0, ev.tcfg['hole_stride'], ev.tcfg['p_hole'])
        holes[:, 0] = False    # no p-1 to compare with at position 0
        xh = x.masked_fill(holes, ev.mask_id)
        if not holes.any():
            continue
        logits, _ = ev.forward(xh, holes=holes.to(ev.dev))
        logits = logits.float().cpu()
        hit += int((logits[holes].argmax(-1) == x[holes]).sum())
        hole_nll += F.cross_entropy(logits[holes], x[holes], reduction='sum').item()
        prev = torch.roll(holes, -1, dims=1)     # p-1 for every hole p
        clean_logits, _ = ev.forward(x)
        unholed += int((clean_logits.float().cpu()[prev].argmax(-1) == x[holes]).sum())
        if pre is not None:
            with ev.ctx:
                pre_logits, _ = pre(xh.to(ev.dev), **{k: v for k, v in ev.knobs.items() if k != 'holes'})
            prior += int((pre_logits.float().cpu()[prev].argmax(-1) == x[holes]).sum())
        n += int(holes.sum())
    if n == 0:
        raise ConfigError("no holes were drawn; raise --eval_iters")
    res = {'model': ev.name, 'holes': n, 'infill_acc': hit / n, 'hole_loss': hole_nll / n,
           'unholed_prefix_acc': unholed / n, 'pretrained_prefix_acc': prior / n if pre is not None else None,
           'pretrained': pre_note, 'holes_passed': ev.accepts_holes,
           'hole_stride': ev.tcfg['hole_stride'], 'p_hole': ev.tcfg['p_hole'],
           'protocol': 'make_holes on the val eval set, every sequence holed; infill_acc: argmax at the hole; '
                       'unholed_prefix_acc: the same model, argmax at p-1 on the un-holed input (it reads the '
                       'other holes\' true tokens); pretrained_prefix_acc: the checkpoint without hole '
                       'fine-tuning, argmax at p-1 on the holed input (the LM prior, the paper\'s no-hole baseline)'}
    pre_txt = f"{100 * res['pretrained_prefix_acc']:.2f}%" if pre is not None else f"n/a ({pre_note})"
    print(f"infill: accuracy at {n} holes {100 * res['infill_acc']:.2f}% (hole loss {res['hole_loss']:.4f}); "
          f"same model from the un-holed prefix {100 * res['unholed_prefix_acc']:.2f}%; "
          f"without hole fine-tuning, from the holed prefix {pre_txt}")
    fig, ax = axes(f"{ev.name}: infill accuracy at holes", 'prediction', 'argmax accuracy (%)')
    names = ['fill at hole', 'un-holed prefix\n(same model)', 'holed prefix\n(no hole fine-tuning)']
    ax.bar(names, [100 * res['infill_acc'], 100 * res['unholed_prefix_acc'],
                   100 * res['pretrained_prefix_acc'] if pre is not None else 0], color=['C0', 'C7', 'C1'])
    ax.set_ylim(0, 100)
    res['series'] = save_figure(fig, ax, ev.outpath('infill.png'))
    write_json(ev.outpath('infill.json'), res)
    return res


def battery_examples(ev, n):
    """(meta, {task: [(prompt, answer, suffix)]}): the synthetic dataset's own examples of --split (val, or
    test where it was prepared with --n_test) when the checkpoint was trained on it (or mixed it in with
    p_synth), else fresh ones from the val seed."""
    meta, name, split = ev.meta, ev.tcfg['dataset'], ev.opt['split']
    if ev.tcfg.get('p_synth', 0) > 0:
        name = ev.tcfg['synth_dataset']
        meta = read_meta({'data_dir': ev.tcfg['data_dir'], 'dataset': name}) or meta
    if 'tasks' in meta and 'n_train' in meta:
        tasks = DATASETS.get(meta['name'], TASKS)
        path = os.path.join(ev.tcfg['data_dir'], name, f'{split}.bin')
        if split not in ('val', 'test') or split == 'test' and not meta.get('n_test'):
            raise ConfigError(f"the battery reads split 'val', or 'test' where the data has one; {name} has no "
                              f"{split!r} split" + (f" (python prepare_data.py {meta['name']} --n_test N)" if split == 'test' else ''))
        if meta['tasks'] == list(tasks):
            held = synthetic_split(meta['seed'], meta['n_train'], meta['n_val'], tasks, n_test=meta.get('n_test', 0))[split]
            first = encode_example(*held[0][1:3], get_tokenizer(meta)[0], suffix=held[0][3])[0]
        if meta['tasks'] != list(tasks) or (os.path.isfile(path) and np.fromfile(
                path, dtype=np.uint16, count=len(first)).tolist() != first):
            raise ConfigError(f"the synthetic data in {os.path.dirname(path)} was prepared with another battery "
                              f"than today's ({', '.join(tasks)}): prepare it again (python prepare_data.py {meta['name']})")
        out = {t: [] for t in tasks}
        for t, *ex in held:
            if len(out[t]) < n:
                out[t].append(tuple(ex))
        return meta, out
    return meta, {t: synthetic_examples(t, n, 1337 + (TEST_SEED_OFFSET if split == 'test' else VAL_SEED_OFFSET))
                  for t in TASKS}


def battery_readings(ev):
    """The ways this checkpoint answers the battery: fill (the answer's tokens at MASK, argmax at
    each; FON through its holes, a causal model at the MASK positions) and generate (greedy, after
    the prompt only); a GPT trained with causal=False: fill with full attention alone (a
    non-generative encoder has no generate reading)."""
    if not ev.causal:
        return ['fill_bidirectional']
    return ['fill', 'generate']


NOT_READ = {'generate': 'trained with causal=False: a non-generative (bidirectional) encoder, not a generator'}


@torch.no_grad()
def battery_scores(ev):
    """{task: {n, chance, future, <reading>: exact-match rate}} over the battery's val examples."""
    meta, tasks = battery_examples(ev, ev.opt['battery_n'])
    encode, _ = get_tokenizer(meta)
    mask = meta.get('mask_id', ev.mask_id)
    readings = battery_readings(ev)
    rows = {}
    for task, exs in tasks.items():
        enc = []
        for p, a, sfx in exs:
            try:
                ids, pos = encode_example(p, a, encode, suffix=sfx)
            except ValueError as e:
                raise ConfigError(f"battery task {task}: {str(e).splitlines()[0]}")
            if len(ids) <= ev.model.config.block_size:
                enc.append((ids, pos))
        row = {'n': len(enc), 'chance': CHANCE[task], 'future': task in FUTURE}
        right = dict.fromkeys(readings, 0)
        groups = {}
        for ids, pos in enc:        # generation: batch examples whose prompts have the same length
            groups.setdefault(pos[0], []).append((ids, pos))
        for start, grp in groups.items() if 'generate' in readings else ():
            x = torch.tensor([ids[:start] for ids, _ in grp])
            want = [ids[pos[0]:pos[-1] + 1] for ids, pos in grp]
            for _ in range(max(len(w) for w in want)):
                logits, _ = ev.forward(x)
                x = torch.cat([x, logits[:, -1].float().argmax(-1, keepdim=True).cpu()], 1)
            right['generate'] += sum(x[i, start:start + len(w)].tolist() == w for i, w in enumerate(want))
        by_len = {}
        for ids, pos in enc:        # fill: one forward per length
            by_len.setdefault(len(ids), []).append((ids, pos))
        for grp in by_len.values() if mask < ev.vocab else []:
            x = torch.tensor([ids for ids, _ in grp])
            holes = torch.zeros_like(x, dtype=torch.bool)
            for i, (_, pos) in enumerate(grp):
                holes[i, pos] = True
            xm = x.masked_fill(holes, mask)
            for r in (r for r in readings if r != 'generate'):
                extra = {'causal': False} if r == 'fill_bidirectional' else {}
                logits, _ = ev.forward(xm, holes=holes.to(ev.dev), **extra)
                pred = logits.float().argmax(-1).cpu()
                right[r] += sum(bool((pred[i][holes[i]] == x[i][holes[i]]).all()) for i in range(len(grp)))
        for r in readings:   # NaN: no MASK row to fill with, or no example fits block_size
            ok = (r == 'generate' or mask < ev.vocab) and enc
            row[r] = right[r] / len(enc) if ok else float('nan')
        rows[task] = row
    return rows, mask


def battery_table(columns, rows):
    """Markdown: one row per task (and the means over Table 8's six, the future-dependent five and
    their far five, over the tasks that have a value), one column per (label, reading)."""
    lines = ['| task | chance | ' + ' | '.join(label for label, _ in columns) + ' |', '|' + '---|' * (len(columns) + 2)]
    for t, row in rows.items():
        name = f'{t} (future, far)' if t in FAR else f'{t} (future)' if t in FUTURE else t
        lines.append(f'| {name} | {row["chance"]:.3f} | ' + ' | '.join(f'{row[k]:.3f}' for _, k in columns) + ' |')
    for name, ts in (('Table 8 six, mean', [t for t in rows if t in TASKS and t not in FUTURE]),
                     ('future-dependent five, mean', [t for t in rows if t in NEAR]),
                     ('future-dependent five far (beyond FON\'s reach), mean', [t for t in rows if t in FAR])):
        if ts:
            mean = lambda k: float(np.nanmean([rows[t][k] for t in ts])) if any(
                math.isfinite(rows[t][k]) for t in ts) else float('nan')
            lines.append(f'| {name} | {sum(rows[t]["chance"] for t in ts) / len(ts):.3f} | '
                         + ' | '.join(f'{mean(k):.3f}' for _, k in columns) + ' |')
    return '\n'.join(lines)


def plot_battery(title, columns, rows, path):
    names = list(rows)
    fig, ax = axes(title, 'task', 'exact match (%)')
    w = 0.8 / len(columns)
    for j, (label, key) in enumerate(columns):
        ax.bar(np.arange(len(names)) + (j - (len(columns) - 1) / 2) * w,
               [100 * np.nan_to_num(rows[t][key]) for t in names], w, label=label)
    ax.plot(np.arange(len(names)), [100 * rows[t]['chance'] for t in names], 'k_', ms=14, label='chance')
    ax.set_xticks(range(len(names)), names, rotation=45, fontsize=8)
    ax.set_ylim(0, 100)
    return save_figure(fig, ax, path)


LABELS = {'fill': 'fill (answer at MASK)', 'fill_bidirectional': 'fill, full attention (trained causal=False)',
          'generate': 'generate after the prompt'}


def run_battery(ev):
    rows, mask = battery_scores(ev)
    readings = battery_readings(ev)
    columns = [(LABELS[r], r) for r in readings]
    print(battery_table(columns, rows))
    res = {'model': ev.name, 'split': ev.opt['split'], 'tasks': rows, 'mask_id': mask, 'readings': readings,
           'not_read': {r: why for r, why in NOT_READ.items() if r not in readings},
           'protocol': 'fill: the answer\'s tokens set to the MASK id (FON: passed as holes), argmax at each '
                       'equals the answer; fill_bidirectional: the same with full attention, for a GPT trained '
                       'with causal=False; generate: greedy generation after the prompt (the suffix unseen) '
                       'equals the answer'}
    res['series'] = plot_battery(f"{ev.name}: synthetic battery", columns, rows, ev.outpath('battery.png'))
    write_json(ev.outpath('battery.json'), res)
    return res


def compare_battery(evaluators, d):
    """Table 8's layout: every run's fill reading (a Transformer's causal and bidirectional ones)."""
    columns, rows, per_run = [], {}, {}
    for ev in evaluators:
        r = ev.opt['out_dir']
        scores, _ = battery_scores(ev)
        base = os.path.basename(os.path.normpath(r))
        per_run[r] = scores
        for reading in (r for r in battery_readings(ev) if r != 'generate'):
            kind = {'fill': 'causal' if 'causal' in ev.knob_names else 'fill',
                    'fill_bidirectional': 'bidirectional'}[reading]
            key = f'{base}/{reading}'
            columns.append((f'{base} ({ev.name}, {kind})', key))
            for t, row in scores.items():
                rows.setdefault(t, {'chance': row['chance']})[key] = row[reading]
    table = battery_table(columns, rows)
    print(table)
    res = {'runs': per_run, 'table': table, 'columns': columns}
    res['series'] = plot_battery('synthetic battery, fill mode', columns, rows, os.path.join(d, 'battery.png'))
    write_json(os.path.join(d, 'battery.json'), res)
    return res


if __name__ == '__main__':   # the analyses run inside eval.py: say so, and how
    import sys
    if '-h' in sys.argv[1:] or '--help' in sys.argv[1:]:
        print(__doc__.strip())
        sys.exit(0)
    configurator.fail("tools.eval_fill holds eval.py's hole-filling analyses; run them with "
                      "python -m tools.eval --out_dir=RUN --infill=True (or --battery=True)")
