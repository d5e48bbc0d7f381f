"""
LAMBADA (Paperno et al. 2016, arXiv 1606.06031): predict the last word of a passage from the text
before it. Scored as lm-evaluation-harness scores lambada_openai: accuracy, the passages whose word
tokens are all the greedy ones (each given the context and the word's tokens before it), and the
word's perplexity, exp of minus the mean over passages of log p(word | context).

    python prepare_data.py lambada        # data/lambada/lambada_test.jsonl: lambada_openai's 5153 passages
    python -m tools.lambada --init_from=hf:SandyResearch/parcae-140m
    python -m tools.lambada --out_dir=out-parcae --input=passages.txt --sweep=num_recur=1,2,4,8
    python -m tools.eval --out_dir=out-parcae --task=lambada     # the same, as tools.eval's task

--input (default: the file prepare_data.py lambada writes): a .jsonl of {"text": passage}
(lambada_openai's rows) or {"context", "continuation"} (the authors' eval bundle), else a text file
of one passage a line. The word follows the passage's last space and is scored with that space
(' word'): the passage encoded whole, the word's tokens those after the context's, as the harness
encodes a pair. A release whose tokenizer_config.json names a bos_token starts every passage
with it, as the authors' eval does; a run fine-tuned from one reads passages as prepare_data.py
encoded its dataset, without special tokens. A passage longer than the model's block_size keeps its last
block_size tokens. Any other --key=value is a knob of the model's forward (num_recur);
--sweep=KNOB=a,b,c scores at each value.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

import configurator
import models
import pretrained
import run_folder
from configurator import ConfigError, check, parse_args
from prepare_data import get_tokenizer

TEST_FILE = 'lambada_test.jsonl'
TEST_SET = os.path.join('data', 'lambada', TEST_FILE)   # python prepare_data.py lambada writes it

DEFAULTS = dict(
    out_dir='out',
    init_from='',       # '' (out_dir's checkpoint) | hf:OWNER/NAME | a folder of the Parcae authors' format
    input=TEST_SET,     # the passages: .jsonl ({"text"} or {"context", "continuation"}) or one a line
    batch_size=8,
    sweep='',           # KNOB=a,b,c: one score per value (num_recur=1,2,4,8)
    device='auto',
    dtype='auto',
)


def read_passages(path):
    """[(context, ' word')] of the file's passages."""
    items = []
    try:
        with open(path, encoding='utf-8') as f:
            lines = [ln.rstrip('\n') for ln in f if ln.strip()]
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    for n, line in enumerate(lines, 1):
        if path.endswith('.jsonl'):
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ConfigError(f"{path}:{n}: not a JSON row ({e})") from None
            row = row if isinstance(row, dict) else {}
            if isinstance(row.get('context'), str) and isinstance(row.get('continuation'), str):
                items.append((row['context'].strip(), ' ' + row['continuation'].strip()))
                continue
            if not isinstance(row.get('text'), str):
                raise ConfigError(f"{path}:{n}: a row needs \"text\", or \"context\" and \"continuation\"")
            line = row['text']
        context, _, word = line.strip().rpartition(' ')
        if not context or not word:
            raise ConfigError(f"{path}:{n}: a passage needs some text, a space and its last word")
        items.append((context, ' ' + word))
    if not items:
        raise ConfigError(f"{path} holds no passages")
    return items


def encode_passages(items, encode, bos_id, block_size):
    """[(ids, k)]: the passage's tokens, the word the last k, cropped from the left to block_size + 1.
    As the harness: the whole passage encoded, the word's tokens what follows the context's."""
    out = []
    bos = [] if bos_id is None else [bos_id]
    for context, word in items:
        whole, k = bos + encode(context + word), len(bos + encode(context))
        if len(whole) <= k:
            raise ConfigError(f"the word {word.strip()!r} adds no token to its passage")
        out.append((whole[-(block_size + 1):], len(whole) - k))
    return out


@torch.no_grad()
def score(model, encoded, knobs, batch_size, device):
    """[(greedy, log p(word | context))] per passage, batch_size passages a forward, padded on the
    right (a causal model's logits at a position do not see what follows it)."""
    out = []
    for i in range(0, len(encoded), batch_size):
        chunk = encoded[i:i + batch_size]
        L = max(len(ids) for ids, _ in chunk)
        x = torch.tensor([ids + [0] * (L - len(ids)) for ids, _ in chunk], device=device)
        logits, _ = model(x[:, :-1], **knobs)
        logp = F.log_softmax(logits.float(), dim=-1)
        for row, (ids, k) in enumerate(chunk):
            n = len(ids)
            lp, tgt = logp[row, n - 1 - k:n - 1], x[row, n - k:n]
            out.append((bool((lp.argmax(-1) == tgt).all()), lp.gather(-1, tgt[:, None]).sum().item()))
    return out


def summary(scored):
    """(accuracy, perplexity) of the word over the passages."""
    acc = sum(g for g, _ in scored) / len(scored)
    nll = -sum(lp for _, lp in scored) / len(scored)
    return acc, math.exp(nll) if nll < 700 else float('inf')   # exp overflows a float past 709


def load(opt):
    """(model, encode, bos_id, what) of --init_from or --out_dir."""
    source = opt['init_from'] or opt['out_dir']
    model, ckpt = run_folder.load_checkpoint(source, 'cpu')
    meta = ckpt.get('meta') or {}
    if ckpt.get('release'):
        encode, _, bos_id = pretrained.tokenizer(meta)
        what = f"{source} (tokenizer {meta['tokenizer_file']}, bos {meta.get('bos_token')!r})"
    elif 'tokenizer' in meta:
        encode, bos_id, what = get_tokenizer(meta)[0], None, f"{source} ({meta['tokenizer']} tokenizer)"
    else:
        raise ConfigError(f"the checkpoint in {source} carries no tokenizer (meta['tokenizer'])")
    return model, encode, bos_id, what


def sweep_values(text):
    """[(knob, value)] of --sweep=KNOB=a,b,c, [] when empty."""
    if not text:
        return []
    knob, _, values = text.partition('=')
    try:
        return [(knob, int(v)) for v in values.split(',')]
    except ValueError:
        raise ConfigError(f"sweep must be KNOB=a,b,c with integer values (num_recur=1,2,4), got {text!r}") from None


def main(argv):
    try:
        given = parse_args(argv)
        opt = {**DEFAULTS, **check(given.pick(DEFAULTS), DEFAULTS)}
        knobs = {k: v for k, v in given.items() if k not in DEFAULTS}
        if opt['input'] == TEST_SET and not os.path.exists(TEST_SET):
            raise ConfigError(f"no passages at {TEST_SET}: run python prepare_data.py lambada first (offline: --input FILE)")
        if not isinstance(opt['batch_size'], int) or opt['batch_size'] < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {opt['batch_size']!r}")
        points = sweep_values(opt['sweep']) or [(None, None)]
        items = read_passages(opt['input'])
        dev, _, ctx = models.resolve_device(opt['device'], opt['dtype'])
        model, encode, bos_id, what = load(opt)
        bad = [k for k in list(knobs) + [p[0] for p in points if p[0]] if k not in model.knobs]
        if bad:
            raise ConfigError(f"unknown key '{bad[0]}': not a tools.lambada key ({', '.join(DEFAULTS)}) nor a knob "
                              f"of the model ({', '.join(model.knobs)})")
        model.to(dev).eval()
        encoded = encode_passages(items, encode, bos_id, model.config.block_size)
        print(f"{what}: {len(items)} passages from {opt['input']}", file=sys.stderr)
        results = []
        for knob, value in points:
            run_knobs = models.check_knobs({**knobs, **({knob: value} if knob else {})})
            with ctx:
                acc, ppl = summary(score(model, encoded, run_knobs, opt['batch_size'], dev))
            setting = ' '.join(f'{k}={v}' for k, v in run_knobs.items()) or 'defaults'
            print(f"lambada {setting}: accuracy {acc:.4f}, perplexity {ppl:.3f} ({len(items)} passages)")
            results.append({**run_knobs, 'accuracy': acc, 'perplexity': ppl, 'passages': len(items)})
        return results
    except (ConfigError, ValueError) as e:
        configurator.fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except OSError as e:
        configurator.fail(f"{e.filename}: {e.strerror}")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == '__main__':
    configurator.stop_on_signals()   # SIGTERM, SIGHUP: as Ctrl-C
    main(sys.argv[1:])
