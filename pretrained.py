"""
Loading the Parcae authors' released weights (sandyresearch/parcae; SandyResearch/parcae-* on the
Hugging Face hub) into parcae.Parcae. Imports torch and parcae; the optional packages a loader needs
(huggingface_hub, tokenizers) are imported where they are used.
"""
import dataclasses
import hashlib
import json
import os

import torch

from parcae import Parcae, ParcaeConfig, rope_tables

# ----------------------------------------------------------------------------- the authors' released weights
# from_authors maps a checkpoint of the authors' code (sandyresearch/parcae: the dict of its config.json
# and its state dict, the form of SandyResearch/parcae-* on the Hugging Face hub) onto Parcae, exactly
# or not at all. Their layout differs in ways a mapping bridges exactly: RoPE rotates interleaved
# pairs (2i, 2i+1) where apply_rope rotates halves (i, i + hd/2), a permutation of q's and k's rows
# per head that q.k and the QK norm do not see; their ReLU^2 is 0.5 relu(x)^2, the 0.5 folded into
# c_proj; their GatedMLP's fc is [gate; up] in one matrix; a layer of theirs adds a value embedding
# only where its table and its gate both exist (they place the two by different counts), and a
# zero table adds nothing where Parcae's layer has one and theirs does not.

AUTHORS_FIXED = {  # fields that select what Parcae does not compute: their accepted values
    '_class_name': ('ParcaeConfig',), 'model_class_name': ('Parcae',), '_is_recurrent_block_config': (False,),
    'block_class_name': ('TransformerPreNormBlock',), 'norm_class_name': ('RMSNorm',), 'bias': (False,),
    'qk_bias': (False,), 'clip_qkv': (None,), 'logit_softcap': (None,), 'mup_model_scaling_factor': (1,),
    'state_init': ('like-init',), 'use_abacus': (False,), 'randomize_positions_from': (None,),
    'debias_attention': (False,), 'center_attention': (False,), 'use_fused_head': ('pytorch', 'cce'),
    'recurrent_iteration_method': ('per-sequence',), 'sampling_scheme': ('poisson-truncated-full', 'fixed'),
    'init_strategy': ('scaled-zero', 'scaled'), 'injection_type': ('diagonal', 'linear')}
AUTHORS_UNUSED = {  # kernels, checkpointing, init-only and schedule fields, names, derived sizes
    'name', 'hf_config', 'attn_impl', 'activation_checkpoint_impl', 'simple_ops', 'strategy', 'lockstep_n',
    'lockstep_k', 'curriculum_target', 'skip_initialization', 'init_orthogonal', 'padding_multiple',
    'vocab_size', 'head_size', 'n_head', 'n_query_groups', 'n_layer', 'rope_settings'}
AUTHORS_MAPPED = ('block_size', 'padded_vocab_size', 'n_embd', 'num_attention_heads', 'intermediate_size',
                  'n_layers_in_prelude', 'n_layers_in_recurrent_block', 'n_layers_in_coda', 'mlp_class_name',
                  'nonlin_name', 'qk_norm', 'norm_eps', 'tie_embeddings', 'prelude_norm', 'mean_recurrence',
                  'mean_backprop_depth', 'num_key_value_heads', 'recurrent_num_attention_heads',
                  'recurrent_embedding_dimension', 'recurrent_intermediation_embedding_dimension')
AUTHORS_RENAMES = (('core_block.', 'recur.'), ('norm_1.', 'norms.0.'), ('norm_2.', 'norms.1.'),
                   ('mlp.fc.', 'mlp.c_fc.'), ('mlp.proj.', 'mlp.c_proj.'), ('adapter.adapter.', 'injection.W.'),
                   ('adapter.', 'injection.'), ('ln_prelude.', 'prelude_norm.'))


def from_authors(config, state_dict):
    """A Parcae computing what the authors' model of this config.json dict and state dict computes
    at every depth; a ValueError names the first field or key it cannot map."""
    def need(ok, msg):
        if not ok:
            raise ValueError(f"authors' checkpoint: {msg}")
    c = dict(config)
    for k, v in c.items():
        need(k in AUTHORS_FIXED or k in AUTHORS_UNUSED or k in AUTHORS_MAPPED, f"unknown config field {k!r}")
        need(v in AUTHORS_FIXED.get(k, (v,)), f"{k}={v!r}: Parcae has {AUTHORS_FIXED.get(k)}")
    for k in AUTHORS_MAPPED + ('norm_class_name', 'injection_type', 'init_strategy', 'recurrent_iteration_method'):
        need(k in c, f"config field {k!r} missing")
    d, H, d_ff = c['n_embd'], c['num_attention_heads'], c['intermediate_size'] or 4 * c['n_embd']
    for k, v in (('num_key_value_heads', H), ('recurrent_num_attention_heads', H),
                 ('recurrent_embedding_dimension', d), ('recurrent_intermediation_embedding_dimension', d_ff)):
        need(c[k] in (None, v), f"{k}={c[k]!r}: Parcae has one width and MLP size, no GQA ({v})")
    rope = c.get('rope_settings') if isinstance(c.get('rope_settings'), dict) else {}  # their loader drops it
    need(rope.get('use_rope', True) and rope.get('rope_condense_ratio', 1) == 1, f"rope_settings={rope}")
    mlp = {('BaseMLP', 'ReLU2'): 'relu2', ('GatedMLP', 'SiLU'): 'swiglu'}.get((c['mlp_class_name'], c['nonlin_name']))
    need(mlp, f"mlp_class_name={c['mlp_class_name']!r} with nonlin_name={c['nonlin_name']!r}: "
         "Parcae has BaseMLP with ReLU2 and GatedMLP with SiLU")

    sd, theirs = {}, {}
    for key, w in state_dict.items():
        name = key
        for prefix in ('_orig_mod.', 'module.', 'model.', 'transformer.'):   # wrappers' prefixes; their ModuleDict
            key = key.removeprefix(prefix)
        for old, new in AUTHORS_RENAMES:
            key = key.replace(old, new, 1)
        sd[key], theirs[key] = w.float(), name
    L_P, L_R, L_C = c['n_layers_in_prelude'], c['n_layers_in_recurrent_block'], c['n_layers_in_coda']
    layers = [f'prelude.{i}' for i in range(L_P)] + [f'recur.{i}' for i in range(L_R)] + [f'coda.{i}' for i in range(L_C)]
    used = [f'value_embeds.{j}.weight' in sd and f'{name}.attn.ve_gate.weight' in sd for j, name in enumerate(layers)]
    cfg = ParcaeConfig(block_size=c['block_size'], vocab_size=c['padded_vocab_size'], n_embd=d, n_head=H, d_ff=d_ff,
                       n_prelude=L_P, n_recur_layers=L_R, n_coda=L_C, mlp=mlp, qk_norm=c['qk_norm'],
                       value_embeds=any(used), rope_base=float(rope.get('rope_base', 50000)), norm_eps=c['norm_eps'],
                       tie_weights=c['tie_embeddings'], injection=c['injection_type'], prelude_norm=c['prelude_norm'],
                       init=c['init_strategy'].replace('-', '_'), mean_recurrence=c['mean_recurrence'],
                       mean_backprop_depth=c['mean_backprop_depth'],
                       depth_sampling='fixed' if c.get('sampling_scheme') == 'fixed' else 'per_sequence')
    model = Parcae(cfg)
    hd, own = cfg.head_dim, model.state_dict()
    freqs = sd.pop('freqs_cis', None)     # their RoPE table, loaded with the weights: ours must agree
    if freqs is not None:
        cos, sin = rope_tables(freqs.shape[1], hd, cfg.rope_base, freqs.device)
        need(torch.allclose(freqs[0, :, 0], torch.stack([cos, sin], -1), atol=1e-5),
             f"freqs_cis is not RoPE at base {cfg.rope_base:g}")
    perm = torch.cat([torch.arange(0, hd, 2), torch.arange(1, hd, 2)])
    perm = torch.cat([h * hd + perm for h in range(H)])     # per head: pairs (2i, 2i+1) -> halves (i, i + hd/2)
    for j, name in enumerate(layers):
        for k in (f'{name}.attn.c_q.weight', f'{name}.attn.c_k.weight'):
            if k in sd:
                sd[k] = sd[k][perm]
        fc, proj = f'{name}.mlp.c_fc.weight', f'{name}.mlp.c_proj.weight'
        if mlp == 'relu2' and proj in sd:
            sd[proj] = 0.5 * sd[proj]
        if mlp == 'swiglu' and fc in sd:
            sd[f'{name}.mlp.c_gate.weight'], sd[fc] = sd[fc].chunk(2, dim=0)
        ve, gate = f'value_embeds.{j}.weight', f'{name}.attn.ve_gate.weight'
        need(not used[j] or ve in own, f"{ve!r}: their layer {j} adds a value embedding, Parcae's does not")
        if not used[j]:   # unread by their forward; where Parcae's layer has one, a zero table adds nothing
            sd.pop(ve, None), sd.pop(gate, None)
            if ve in own:
                sd[ve], sd[gate] = torch.zeros_like(own[ve]), torch.zeros_like(own[gate])
    if cfg.tie_weights and 'wte.weight' in sd:
        need(torch.equal(sd.setdefault('lm_head.weight', sd['wte.weight']), sd['wte.weight']),
             "tie_embeddings, but lm_head.weight is not transformer.wte.weight")
    for k in sd:
        need(k in own, f"unknown state-dict key {theirs.get(k, k)!r}")
        need(sd[k].shape == own[k].shape, f"{theirs.get(k, k)!r} has shape {tuple(sd[k].shape)}, Parcae's {k!r} "
             f"{tuple(own[k].shape)}")
    for k in own:
        need(k in sd, f"no state-dict key for Parcae's {k!r}")
    model.load_state_dict(sd)
    return model


# ----------------------------------------------------------------------------- a release: a hub repository or a folder
# As their parcae_lm.from_pretrained reads one: config.json (with _class_name), the state dict in
# pytorch_model.bin or else model.pt, and their Tokenizer's tokenizer.json beside them. A release
# becomes the checkpoint dict train.py writes (run_folder.read_checkpoint hands it on), so sample.py
# and tools.lambada take it where they take an out_dir; train.py's init_from fine-tunes it on a dataset
# that prepare_data.py --tokenizer=json:<its folder> encoded (the sha256 of its tokenizer.json says which);
# tools.eval refuses it, as its val loss needs such a dataset and a run's config.
WEIGHTS = ('pytorch_model.bin', 'model.pt')
TOKENIZER = 'tokenizer.json'


def is_release(path):
    """hf:OWNER/NAME, or a folder holding the authors' config.json and no ckpt.pt of train.py's."""
    path = str(path)
    if path.startswith('hf:'):
        return True
    config = os.path.join(path, 'config.json')
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, 'ckpt.pt')) or not os.path.isfile(config):
        return False
    try:
        with open(config) as f:
            return '_class_name' in json.load(f)
    except (OSError, ValueError):
        return False


def hub_files(repo_id):
    """{file name: local path} of a hub release, downloaded once into the Hugging Face cache."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ValueError(f"hf:{repo_id} needs the huggingface_hub package: pip install huggingface_hub") from None

    def get(name, needed):
        try:
            return hf_hub_download(repo_id, name)
        except Exception as e:   # offline, no such repository, no such file: the hub says which in many ways
            if needed:
                raise ValueError(f"hf:{repo_id}: cannot fetch {needed} ({type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:160] if str(e) else 'no detail'})") from None
    files = {'config.json': get('config.json', 'config.json')}
    weights = get(WEIGHTS[0], None)
    files.update({WEIGHTS[0]: weights} if weights else {WEIGHTS[1]: get(WEIGHTS[1], ' or '.join(WEIGHTS))})
    for name in (TOKENIZER, 'tokenizer_config.json'):
        if path := get(name, None):
            files[name] = path
    return files


def release_files(source):
    """{file name: local path} of the files of a release that exist."""
    if str(source).startswith('hf:'):
        return hub_files(str(source)[3:])
    names = ('config.json',) + WEIGHTS + (TOKENIZER, 'tokenizer_config.json')
    files = {n: os.path.join(source, n) for n in names if os.path.isfile(os.path.join(source, n))}
    if not any(w in files for w in WEIGHTS):
        raise ValueError(f"{source} holds no weights (their loader reads {' or '.join(WEIGHTS)})")
    return files


def read_release(source, device='cpu'):
    """The checkpoint dict of a release, as train.py's: the mapped weights (model), model_name and
    model_args, an empty training config, iter_num 0, and a meta naming its tokenizer.json and its sha256."""
    files = release_files(source)
    with open(files['config.json']) as f:
        config = json.load(f)
    weights = files.get(WEIGHTS[0], files.get(WEIGHTS[1]))
    try:
        state_dict = torch.load(weights, map_location='cpu', weights_only=True)
    except Exception as e:
        raise ValueError(f"{weights} is unreadable ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
    model = from_authors(config, state_dict)
    meta = {'tokenizer': TOKENIZER, 'tokenizer_file': files.get(TOKENIZER), 'tokenizer_sha256': None,
            'vocab_size': model.config.vocab_size, 'bos_token': None}
    if TOKENIZER in files:   # what a dataset prepared with it records (prepare_data.py --tokenizer=json:)
        with open(files[TOKENIZER], 'rb') as f:
            meta['tokenizer_sha256'] = hashlib.file_digest(f, 'sha256').hexdigest()
    if 'tokenizer_config.json' in files:   # their eval starts every text with it
        with open(files['tokenizer_config.json']) as f:
            bos = json.load(f).get('bos_token')
        meta['bos_token'] = bos.get('content') if isinstance(bos, dict) else bos
    return {'model': {k: v.to(device) for k, v in model.state_dict().items()}, 'model_name': 'parcae',
            'model_args': dataclasses.asdict(model.config), 'config': {'init_from': str(source)}, 'iter_num': 0,
            'meta': meta, 'release': str(source)}


def tokenizer(meta):
    """(encode, decode, bos_id) of a release's tokenizer.json, through the tokenizers package as their
    Tokenizer reads it: no special tokens added on encode, none skipped on decode."""
    if not meta.get('tokenizer_file'):
        raise ValueError("the release has no tokenizer.json beside its weights")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ValueError(f"{meta['tokenizer_file']} needs the tokenizers package: pip install tokenizers") from None
    tok = Tokenizer.from_file(meta['tokenizer_file'])
    bos = meta.get('bos_token')
    bos_id = tok.token_to_id(bos) if bos else None
    return (lambda s: tok.encode(s, add_special_tokens=False).ids,
            lambda ids: tok.decode([int(i) for i in ids], skip_special_tokens=False), bos_id)
