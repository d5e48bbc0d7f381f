"""
Builds tests/fixtures/parcae_authors/ with the Parcae authors' own code: two tiny models, each saved as
their save_pretrained writes a release (config.json with _class_name, model.pt) with its logits on a
fixed input at num_recur 1, 2 and 4 and the initial states h_0 their forward drew (expected.pt):
released/ has the released models' structure (parcae-small-140m's config at width 32, vocabulary 64:
prelude, recurrent block and coda of 2 layers each, diagonal injection, prelude norm, QK norm, ReLU^2
MLP, value embeddings, tied head); variant/ the other paths a mapping takes (one layer each, SwiGLU,
the linear injection, no prelude or QK norm, an untied head, and value-embedding gates that their code
places apart from the tables). Beside them a tokenizer.json of their tokenizer's format.

    git clone https://github.com/sandyresearch/parcae /tmp/parcae-authors
    pip install tokenizers     # the tiny tokenizer; their code itself needs only torch here
    python -m tools.parcae_fixture --authors=/tmp/parcae-authors

Every parameter is redrawn at a scale where every path matters (their init zeroes the output
projections), from a fixed seed; their SDPA attention runs (no FlashAttention on a CPU), in float32.
tests/test_parcae_authors.py loads the result through pretrained.from_authors.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'fixtures', 'parcae_authors')
DEPTHS = (1, 2, 4)
TEXT = "the loop runs the same block again; a stable loop forgets where it started. " * 4

# parcae-small-140m (their parcae_lm/configs/parcae/parcae-small-140m.py), narrowed
CONFIG = dict(name='parcae-fixture', block_size=64, vocab_size=64, padding_multiple=64, n_embd=32,
              num_attention_heads=2, num_key_value_heads=2, intermediate_size=64, bias=False,
              tie_embeddings=True, block_class_name='TransformerPreNormBlock', norm_class_name='RMSNorm',
              norm_eps=1e-5, mlp_class_name='BaseMLP', nonlin_name='ReLU2', qk_norm=True, logit_softcap=None,
              prelude_norm=True, init_strategy='scaled-zero', init_orthogonal=True, injection_type='diagonal',
              state_init='like-init', recurrent_embedding_dimension=32,
              recurrent_intermediation_embedding_dimension=64, n_layers_in_recurrent_block=2,
              n_layers_in_prelude=2, n_layers_in_coda=2, mean_recurrence=8,
              sampling_scheme='poisson-truncated-full', mean_backprop_depth=4,
              recurrent_iteration_method='per-sequence', attn_impl='sdpa')
VARIANT = dict(CONFIG, intermediate_size=32, recurrent_intermediation_embedding_dimension=32, tie_embeddings=False,
               mlp_class_name='GatedMLP', nonlin_name='SiLU', qk_norm=False, prelude_norm=False,
               init_strategy='scaled', injection_type='linear', n_layers_in_recurrent_block=1,
               n_layers_in_prelude=1, n_layers_in_coda=1)


def tokenizer(vocab_size):
    """A byte-level BPE of vocab_size entries trained on TEXT, in the tokenizer.json format their
    released tokenizer comes in (Hugging Face tokenizers)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = sorted(set(TEXT))
    tok.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet,
                                                        show_progress=False))
    return tok


@torch.no_grad()
def redraw(model):
    """Every parameter at a scale where it changes the logits: matrices N(0, 1/fan_in), embeddings
    N(0, 1), norm gains 1 + N(0, 0.1^2), log A ~ N(0, 0.3^2), dt_bias ~ N(0, 0.5^2)."""
    g = torch.Generator().manual_seed(0)
    for name, p in model.named_parameters():
        z = torch.randn(p.shape, generator=g)
        if name.endswith(('A_log',)):
            p.copy_(0.3 * z)
        elif name.endswith('dt_bias'):
            p.copy_(0.5 * z)
        elif p.ndim == 1:
            p.copy_(1 + 0.1 * z)
        elif 'wte' in name or 'value_embeds' in name:
            p.copy_(z)
        else:
            p.copy_(z / p.shape[1] ** 0.5)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--authors', required=True, help='a checkout of sandyresearch/parcae')
    ap.add_argument('--out', default=OUT)
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(args.authors, 'parcae_lm', 'models', 'parcae', 'parcae.py')):
        print(f"error: --authors={args.authors} is not a checkout of sandyresearch/parcae "
              "(no parcae_lm/models/parcae/parcae.py)", file=sys.stderr)
        sys.exit(2)
    try:
        import tokenizers  # noqa: F401 (tokenizer() below)
    except ImportError:
        print("error: the tiny tokenizer needs the tokenizers package (pip install tokenizers)", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, os.path.abspath(args.authors))
    import parcae_lm
    from parcae_lm.models.parcae.config import ParcaeConfig

    tok = tokenizer(CONFIG['vocab_size'])
    ids = tok.encode(TEXT).ids[:32]
    idx = torch.tensor([ids[:16], ids[16:32]])                    # (2, 16)
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, 'tokenizer.json'))
    for name, config in (('released', CONFIG), ('variant', VARIANT)):
        torch.manual_seed(0)
        model = ParcaeConfig(**config).construct_model()
        redraw(model)
        model.eval()
        h0s = []   # their eval draws h_0 afresh every forward: kept, so that a test can feed the same
        draw = model.initialize_state
        model.initialize_state = lambda e: h0s.append(draw(e)) or h0s[-1]
        expected = {'idx': idx}
        for T in DEPTHS:
            with torch.no_grad():
                out = model(idx, return_logits=True, num_steps_pair=torch.tensor([T, 0]))   # T steps, k = 0
            expected[f'logits_{T}'], expected[f'h0_{T}'] = out['logits'], h0s[-1]
        del model.initialize_state
        parcae_lm.save_pretrained(model, os.path.join(args.out, name))   # config.json, model.pt
        torch.save(expected, os.path.join(args.out, name, 'expected.pt'))
    commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=args.authors, capture_output=True,
                            text=True).stdout.strip() or 'unknown'
    with open(os.path.join(args.out, 'README.md'), 'w') as f:
        f.write("Two tiny Parcae models built and run with the authors' code (sandyresearch/parcae at commit\n"
                f"{commit}) by `python -m tools.parcae_fixture`: released/ of the released models' structure,\n"
                "variant/ the other mapped paths. config.json and model.pt as their save_pretrained writes them;\n"
                f"expected.pt: input ids, logits at num_recur {', '.join(map(str, DEPTHS))} and the h_0 each run drew (float32, CPU, SDPA).\n"
                f"tokenizer.json: a {CONFIG['vocab_size']}-entry byte-level BPE in their tokenizer's format (Hugging Face tokenizers).\n")
    sizes = {os.path.relpath(os.path.join(d, f), args.out): os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(args.out) for f in sorted(files)}
    print(json.dumps(sizes))


if __name__ == '__main__':
    main()
