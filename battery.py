"""
The synthetic skill battery: TASKS, the FON paper's Table 8 tasks and its future-dependent fill tasks
(the paper names them and gives mem_s4's chance, 0.25; the definitions are ours). One example per
line, prompt + answer + suffix + "\n":
    mems4 b=2 d=6 s=1 q=3 <6-14 filler words> ? d = 6   long-range retrieval, 4 stored values
    meml 4 <10-20 filler words> = 4                     long-range memory of one digit
    add 36+69 = 105          statel 6 -9 -5 +8 = 0 (a counter mod 10)          cmp 822 395 = >
    sortrel 7 9 1 4 ? 9 = 4  (the queried digit's rank in the sorted list)
In those six the prompt holds everything the answer needs. In FUTURE the answer comes before what
decides it, so a causal reader is at chance. NEAR (ind_r, state_inv, perm_h1, mem_r, trans_r):
    indr 2xq = 2xq           stateinv 1 +6 -2 +3 = 8 (the start)    permh1 1 5 2 7 3 0 6 4 (missing)
    memr h = 3 ? i=6 h=3     transr t n = < ? t<v v<n
with that evidence laid out the same way every time within 14 characters after the answer, well
inside the reach of FON's bidirectional revision. That reach, FON_REACH = 30 positions after a
hole at the battery config's FON, is two stacked centred ripple kernels of width 32 (offsets up to
+15 each, n_ripple 2; gamma addressing alone reaches 16); tests/test_fon.py measures it. FAR
(ind_r_far, ..., trans_r_far): the same five with 8-12 filler words between the answer and its
evidence, which then starts 33-49 characters after the answer's end (evidence_gap), beyond that
reach, so a model whose only look-ahead is FON's revision is at chance there and full attention is not:
    indrfar 2xq kwe obt zrq ahm vox luw pem tid = 2xq
    memrfar h = 3 uat jis qom beq wyx ryo kad fub ? i=6 h=3
CHANCE is a uniform guess among the answers the task's format allows. The prompt does not end
with a space and the answer and any suffix start with one, so the prompt's tokens (and those of
prompt + answer) are a prefix of the example's under every tokenizer (GPT-2's pre-tokenizer
splits before the space): eval.py scores the answer causally (generate after the prompt) and in
fill mode (the answer's tokens replaced by mask_id), see encode_example(). {split}_answers.bin
marks each token of the stream that belongs to an answer (uint8, 1), so hole fine-tuning can hole
the answer spans: the task-given holes. synthetic_examples(task, n, seed) is deterministic;
`prepare_data.py synthetic` writes train examples from --seed and val examples from seed +
VAL_SEED_OFFSET, with every val example whose text occurs in train dropped (so the instances
of small spaces, e.g. 2-digit sums, which train covers, are rarer in val).
synthetic_split() rebuilds exactly those examples.
"""
import random
import re

import numpy as np

LETTERS = 'abcdefghijklmnopqrstuvwxyz'
DIGITS = '0123456789'
SYNTH_CHARS = sorted(set(LETTERS + DIGITS + ' =?+-<>\n'))  # the fixed char alphabet of the battery
SYNTH_MASK_TOKEN = '_'
VAL_SEED_OFFSET = 1_000_003
TEST_SEED_OFFSET = 2_000_029


def _words(rng, lo, hi):
    """Filler between what a long-range task stores and where it asks: random 3-letter words."""
    return ' '.join(''.join(rng.choices(LETTERS, k=3)) for _ in range(rng.randint(lo, hi)))


def _ops(rng, lo, hi):
    return [s + d for s, d in zip(rng.choices('+-', k=hi), rng.choices(DIGITS[1:], k=hi))][:rng.randint(lo, hi)]


# Table 8's six tasks: everything the answer needs is in the prompt (left of the answer)

def _mem_s4(rng):
    keys, vals = rng.sample(LETTERS, 4), rng.sample(DIGITS, 4)
    q = rng.randrange(4)
    store = ' '.join(f'{k}={v}' for k, v in zip(keys, vals))
    return f'mems4 {store} {_words(rng, 6, 14)} ? {keys[q]} =', ' ' + vals[q], ''


def _mem_l(rng):
    v = rng.choice(DIGITS)
    return f'meml {v} {_words(rng, 10, 20)} =', ' ' + v, ''


def _add(rng):
    a, b = rng.randrange(100), rng.randrange(100)
    return f'add {a}+{b} =', f' {a + b}', ''


def _state_l(rng):
    x = start = rng.randrange(10)
    ops = _ops(rng, 4, 8)
    for op in ops:
        x = (x + int(op)) % 10
    return f'statel {start} ' + ' '.join(ops) + ' =', f' {x}', ''


def _sort_rel(rng):
    xs = rng.sample(DIGITS, rng.randint(3, 6))
    q = rng.choice(xs)
    return 'sortrel ' + ' '.join(xs) + f' ? {q} =', f' {sorted(xs).index(q) + 1}', ''


def _cmp(rng):
    a = rng.randrange(1000)
    b = a if rng.random() < 0.1 else rng.randrange(1000)  # equal pairs would be rare by chance
    return f'cmp {a} {b} =', ' ' + ('<' if a < b else '>' if a > b else '='), ''


# the future-dependent fill tasks: the prompt says nothing about the answer, the suffix decides it,
# laid out the same way every time within 14 characters after the answer (the reach of FON's
# bidirectional ripple kernels); _far() makes their far variants

def _ind_r(rng):
    s = ''.join(rng.choices(LETTERS + DIGITS, k=3))
    return 'indr', ' ' + s, ' = ' + s


def _state_inv(rng):
    start = rng.randrange(10)
    ops = _ops(rng, 3, 3)
    return 'stateinv', f' {start}', ' ' + ' '.join(ops) + f' = {(start + sum(int(o) for o in ops)) % 10}'


def _perm_h1(rng):
    xs = rng.sample(DIGITS[:8], 8)
    return 'permh1', ' ' + xs[0], ' ' + ' '.join(xs[1:])


def _mem_r(rng):
    keys, vals = rng.sample(LETTERS, 2), rng.choices(DIGITS, k=2)
    q = rng.randrange(2)
    return f'memr {keys[q]} =', ' ' + vals[q], ' ? ' + ' '.join(f'{k}={v}' for k, v in zip(keys, vals))


def _trans_r(rng):
    a, b, c = rng.sample(LETTERS, 3)
    x, y = (a, c) if rng.random() < 0.5 else (c, a)
    return f'transr {x} {y} =', ' <' if x == a else ' >', f' ? {a}<{b} {b}<{c}'


# the far variants: the same five with filler words between the answer and its evidence
FON_REACH = 30            # a FON hole's output depends on the positions up to 30 after it (n_ripple 2 x 15)
FAR_FILLER = (8, 12)      # filler words: 31-47 characters, so the evidence starts 33-49 after the answer


def _far(near):
    """The far variant of a NEAR task: its prompt's first word gets 'far' (indr -> indrfar) and
    FAR_FILLER random words go between the answer and the suffix that decides it."""
    def far(rng):
        prompt, answer, suffix = near(rng)
        name, _, rest = prompt.partition(' ')
        return name + 'far' + (' ' + rest if rest else ''), answer, ' ' + _words(rng, *FAR_FILLER) + suffix
    return far


NEAR = ('ind_r', 'state_inv', 'perm_h1', 'mem_r', 'trans_r')   # the answer depends on text just after it
FAR = tuple(f'{t}_far' for t in NEAR)                          # ... on text beyond FON's ripple reach
TASKS = {'mem_s4': _mem_s4, 'mem_l': _mem_l, 'add': _add, 'state_l': _state_l, 'sort_rel': _sort_rel, 'cmp': _cmp,
         'ind_r': _ind_r, 'state_inv': _state_inv, 'perm_h1': _perm_h1, 'mem_r': _mem_r, 'trans_r': _trans_r}
TASKS.update({f'{t}_far': _far(TASKS[t]) for t in NEAR})
FUTURE = NEAR + FAR   # the answer depends on text after it
# chance: the accuracy of a uniform guess among the answers the task's format allows, which is all
# a model can do without the evidence (for FUTURE tasks: all a causal model can do)
CHANCE = {'mem_s4': 1 / 4, 'mem_l': 1 / 10, 'add': 1 / 199, 'state_l': 1 / 10,
          'sort_rel': sum(1 / k for k in range(3, 7)) / 4, 'cmp': 1 / 3,
          'ind_r': 1 / 36 ** 3, 'state_inv': 1 / 10, 'perm_h1': 1 / 8, 'mem_r': 1 / 10, 'trans_r': 1 / 2}
CHANCE.update({f'{t}_far': CHANCE[t] for t in NEAR})


# The depth task: the answer needs k sequential lookups. A random 8-cycle over 8 of the 26
# letters is listed as pairs "xy" (x's successor y) in random order; a query is the hop count k and
# a letter, and the answer, right after it, is the letter k steps along the cycle. Each step is one
# lookup in the context that depends on the one before, so a model needs about one attention layer
# (or loop step) per hop; loss on the answers only (train.py --loss_on=answers) leaves no shortcut
# through the rest of the text. The layout is associative recall's (key and value adjacent, the
# answer right after the key), where one hop is an induction head's copy: with the pair as "x>y" and
# the query "? x k =" a GPT 3L learned no lookup at all. Seven more queries of the same listing
# follow (the suffix), each naming its own letter and hop count, no pair twice, each answer scored in
# training, so that one listing teaches the lookup eight times, the one-hop case among them. The
# scores (eval.py) read the first answer only, the one no earlier answer can shorten. Every query
# asked at one k would leak: the answers of a listing at one k are a permutation, so the later ones
# follow by elimination (a probe learned that and no lookup).
#     hop3 cf ac fb bd dg ge eh ha 3ab 1eh 5hd ...
HOPS = (1, 2, 3, 4, 5, 6)
HOP_LETTERS = 8
HOP_QUERIES = 8


def lookups(k):
    """The fewest pointer lookups that answer hop count k: k steps along the cycle are also
    HOP_LETTERS - k steps back (each pair read right to left), so k = 6 needs two, k = 5 three."""
    return min(k, HOP_LETTERS - k)


def _hop(k, hops=HOPS):
    """The task at k; hops: the hop counts the seven further queries draw from."""
    def hop(rng):
        cycle = rng.sample(LETTERS, HOP_LETTERS)
        pairs = [a + b for a, b in zip(cycle, cycle[1:] + cycle[:1])]
        rng.shuffle(pairs)
        first = rng.randrange(HOP_LETTERS)
        others = [(q, j) for q in range(HOP_LETTERS) for j in hops if (q, j) != (first, k)]
        qa = [(f' {j}{cycle[q]}', cycle[(q + j) % HOP_LETTERS])
              for q, j in [(first, k)] + rng.sample(others, HOP_QUERIES - 1)]
        return f'hop{k} ' + ' '.join(pairs) + qa[0][0], qa[0][1], ''.join(q + a for q, a in qa[1:])
    return hop


def suffix_answers(task, suffix):
    """The (start, end) character spans of the further answers in an example's suffix: the hop
    tasks' later queries (the letter after each ' k x'); none for every other task."""
    if task not in HOP_TASKS and task not in CURRICULUM:
        return []
    return [m.span(1) for m in re.finditer(r' [1-9][a-z]([a-z])', suffix)]


HOP_TASKS = {f'hop{k}': _hop(k) for k in HOPS}
# the depth gate's curriculum (prepare_data.py hops1 ... hops5): hopsN asks only hop counts 1 ... N, in
# the task's layout and alphabet. Among mixed hop counts neither GPT learned even the one-hop lookup in
# 10,000 iterations (each hop count's answers at chance); learned first, it stays exact through the task.
UP_TO = {n: {f'hop{k}of{n}': _hop(k, hops=tuple(range(1, n + 1))) for k in range(1, n + 1)} for n in HOPS[:-1]}
CURRICULUM = {t: f for tasks in UP_TO.values() for t, f in tasks.items()}
CHANCE.update({t: 1 / (HOP_LETTERS - 1) for t in {**HOP_TASKS, **CURRICULUM}})   # any listed letter but the queried one
ALL_TASKS = {**TASKS, **HOP_TASKS, **CURRICULUM}
# prepare_data.py NAME -> the tasks it holds
DATASETS = {'synthetic': TASKS, 'hops': HOP_TASKS, **{f'hops{n}': tasks for n, tasks in UP_TO.items()},
            'quickstart': {'mem_l': TASKS['mem_l']}}


def evidence_gap(prompt, answer, suffix):
    """Characters from the answer's end to where a FUTURE example's evidence starts: past the
    suffix's leading space and any filler words (3 lowercase letters; no task's evidence opens with one)."""
    words = suffix.split(' ')[1:]
    k = 0
    while k < len(words) and len(words[k]) == 3 and words[k].isalpha() and words[k].islower():
        k += 1
    return len(suffix) - len(' '.join(words[k:]))


def synthetic_examples(task, n, seed):
    """n (prompt, answer, suffix) triples of one task, deterministic in (task, seed); a prefix of
    the list for a larger n. The example's text is prompt + answer + suffix + '\\n'."""
    if task not in ALL_TASKS:
        raise ValueError(f'unknown synthetic task {task!r}; tasks: {", ".join(ALL_TASKS)}')
    rng = random.Random(f'{task}/{seed}')
    return [ALL_TASKS[task](rng) for _ in range(n)]


def synthetic_split(seed, n_train, n_val, tasks=TASKS, n_test=0):
    """A synthetic dataset's examples: {'train': [(task, prompt, answer, suffix)], 'val': [...]}, and
    'test' when n_test > 0. Tasks in equal shares; train shuffled by seed; val from seed +
    VAL_SEED_OFFSET without any example whose text is in train; test from seed + TEST_SEED_OFFSET
    without any in train or val, so that a verdict read on test was never seen by a choice made on val."""
    def share(n, i):
        return n // len(tasks) + (i < n % len(tasks))
    train = [(t, *ex) for i, t in enumerate(tasks) for ex in synthetic_examples(t, share(n_train, i), seed)]
    random.Random(seed).shuffle(train)
    seen = {''.join(ex[1:]) for ex in train}
    out = {'train': train}
    for split, n, offset in (('val', n_val, VAL_SEED_OFFSET), ('test', n_test, TEST_SEED_OFFSET)):
        if split == 'test' and n < 1:
            break
        held = []
        for i, t in enumerate(tasks):
            k = share(n, i)
            fresh = [(t, *ex) for ex in synthetic_examples(t, 4 * k + 100, seed + offset)
                     if ''.join(ex) not in seen][:k]
            if len(fresh) < k:
                raise ValueError(f'synthetic task {t}: only {len(fresh)} of {k} {split} examples are not in '
                                 f'{" or ".join(out)}')
            held += fresh
        random.Random(seed + offset).shuffle(held)
        seen |= {''.join(ex[1:]) for ex in held}
        out[split] = held
    return out


def encode_example(prompt, answer, encode, mask_id=None, suffix=''):
    """(ids of prompt + answer + suffix + '\\n', answer positions); with mask_id the answer's ids
    are replaced by it (fill mode). encode is get_tokenizer(meta)[0]. The answer and a nonempty
    suffix start with a space, so the ids of the prompt (and of prompt + answer) are a prefix of
    the example's under every tokenizer (GPT-2's pre-tokenizer splits before a space)."""
    ids = encode(prompt + answer + suffix + '\n')
    head, upto = encode(prompt), encode(prompt + answer)
    if ids[:len(head)] != head or ids[:len(upto)] != upto:
        raise ValueError('the prompt or answer does not tokenize as a prefix of the example')
    start, end = len(head), len(upto)
    if mask_id is not None:
        ids = ids[:start] + [mask_id] * (end - start) + ids[end:]
    return ids, list(range(start, end))


def synthetic_ids(examples, encode):
    """The token stream of the examples and, per token, 1 where it belongs to an answer: the span
    that fill mode masks and hole fine-tuning holes (the task-given holes of FON's protocol)."""
    ids, answer = [], []
    for task, p, a, s in examples:
        x, pos = encode_example(p, a, encode, suffix=s)
        for lo, hi in suffix_answers(task, s):   # each starts with a space: its tokens are whole
            head, upto = encode(p + a + s[:lo]), encode(p + a + s[:hi])
            if x[:len(head)] != head or x[:len(upto)] != upto:
                raise ValueError('a suffix answer does not tokenize as a prefix of the example')
            pos += range(len(head), len(upto))
        mark = [0] * len(x)
        for i in pos:
            mark[i] = 1
        ids += x
        answer += mark
    return np.array(ids, dtype=np.uint16), np.array(answer, dtype=np.uint8)
