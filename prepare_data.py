"""
Prepare a dataset: data/<dir>/{train.bin, val.bin[, test.bin], meta.json}, as nanoGPT's prepare.py scripts.

    python prepare_data.py NAME [--tokenizer gpt2|byte|char|json:PATH] [--input FILE] [--out_dir data] [--url BASE] ...

NAME is a row of SOURCES, each read by a function whose docstring says how it splits, or any plain folder
name with --input FILE. The .bin files are flat np.uint16 token streams; meta.json, written last, holds the
tokenizer, vocab_size, itos/stoi (char), bpe_vocab (gpt2 --vocab N: GPT-2's first N-1 merges + <|endoftext|>
= N-1), mask_id (battery.py's datasets), source, split, {split}_tokens and max_id (each split's largest id:
data.py checks these at start instead of reading every id). --tokenizer=json:PATH encodes a text with a
tokenizer.json (the file, or a folder holding one: a Parcae release's) through the tokenizers package into
NAME_json_<its sha256's first 8>; meta.json records tokenizer_sha256, and the folder keeps a copy of the file
(tokenizer_file). The byte tokenizer's 257th symbol ends each WikiText row and fineweb_edu document.
Downloads resume and are checked (SHA256, SIZES, the HuggingFace Hub's X-Linked-Etag); --url BASE or
PREPARE_DATA_URL names a mirror. More: docs/training.md#data. Reading a dataset back: data.py. In-process:
prepare(name, ...) -> the folder; a mistake raises DataError.
"""
import argparse
import codecs
import errno
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import signal
import socket
import sys
import zipfile
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

import numpy as np
import tiktoken
from tqdm import tqdm

from battery import DATASETS, SYNTH_CHARS, SYNTH_MASK_TOKEN, VAL_SEED_OFFSET, synthetic_ids, synthetic_split
from configurator import ConfigError

TOKENIZERS = ('gpt2', 'byte', 'char')
TOKENIZER_JSON = 'tokenizer.json'   # --tokenizer=json:PATH's file, and its copy in the dataset folder
ROW_SEP = 256  # the byte tokenizer's row separator
# char-rnn publishes no checksum for tiny shakespeare; this is the sha256 that projects pinning the
# file (TensorFlow Datasets among them) agree on. WikiText-103's is HuggingFace datasets' for this zip.
# lambada_test.jsonl's are those lm-evaluation-harness records for lambada_openai's file (OpenAI's own copy).
SHA256 = {'input.txt': '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed',
          'wikitext-103-raw-v1.zip': '91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794',
          'lambada_test.jsonl': '4aa8d02cd17c719165fc8a7887fddd641f43fcafa4b1c806ca8abc31fabdb226'}
LAMBADA_PASSAGES = 5153   # lambada_openai's test set
SIZES = {'input.txt': 1115394, 'wikitext-103-raw-v1.zip': 191984949, 'enwik8.zip': 36445475,
         'lambada_test.jsonl': 1819752}
TRAIN_CAPS = {('tinystories', 'byte'): 250_000_000}   # the causal workspace paper's --max-train-tokens


class DataError(ConfigError):
    """A mistake or an expected failure (network, bad input): one line, no traceback."""


def check_name(name):
    """A dataset is a plain folder under data/: train.py's --dataset and prepare's NAME."""
    if not isinstance(name, str) or not re.fullmatch(r'[A-Za-z0-9_-][A-Za-z0-9_.-]*', name):
        raise DataError(f'dataset name {name!r} must be a plain folder name: letters, digits, _ . - (not starting with .)')


# ----------------------------------------------------------------------------- downloads
def error_line(e):
    """One short line for an exception (requests' messages nest a whole traceback's worth)."""
    msg = str(e).splitlines()[0] if str(e) else ''
    m = re.search(r"(Failed to resolve '[^']+'|Connection refused|timed out|Name or service not known)", msg)
    return f'{type(e).__name__}: {m.group(1) if m else msg[:200]}'


def _file_urls(base, files):
    """base + '/' + file, or base itself when it is the full URL of a one-file source."""
    base = base.rstrip('/')
    if len(files) == 1 and os.path.splitext(urlparse(base).path)[1] == os.path.splitext(files[0])[1]:
        return [base]
    return [f'{base}/{f}' for f in files]


def download(url, path, sha256=None, size=None, name='NAME', quiet=False):
    """Stream url to path (a tqdm bar on stderr), resuming a leftover path + '.part' with a Range
    request; check the size and the sha256 (given, or the one the server publishes)."""
    if os.path.exists(path):
        return path  # it was checked before it got its final name
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    part = path + '.part'
    have = os.path.getsize(part) if os.path.exists(part) else 0
    offline = f'Without network, prepare from a local copy: python prepare_data.py {name} --input FILE'
    import requests   # here, not at the top: data.py imports this file and downloads nothing
    try:
        # identity encoding: byte ranges and Content-Length then count the file's own bytes
        headers = {'Accept-Encoding': 'identity', **({'Range': f'bytes={have}-'} if have else {})}
        with requests.get(url, stream=True, timeout=(15, 60), headers=headers) as r:
            if not (have and r.status_code == 416):  # 416: the .part already holds the whole file
                r.raise_for_status()
                if have and r.status_code != 206:
                    have = 0  # the server ignored the Range header: start over
                elif have and not r.headers.get('Content-Range', '').startswith(f'bytes {have}-'):
                    os.remove(part)
                    raise DataError(f'{url} resumed at the wrong offset; the partial file was deleted, run again')
                # the HuggingFace Hub sends the sha256 of LFS files as X-Linked-Etag on the redirect
                tags = [t.headers.get('X-Linked-Etag', '').strip('"') for t in [*r.history, r]]
                sha256 = sha256 or next((t for t in tags if re.fullmatch(r'[0-9a-f]{64}', t)), None)
                length = r.headers.get('Content-Length')
                total = have + int(length) if length and length.isdigit() else size
                with open(part, 'ab' if have else 'wb') as f, tqdm(total=total, initial=have, unit='B', unit_scale=True,
                                                                   unit_divisor=1024, desc=os.path.basename(path),
                                                                   disable=quiet) as bar:
                    for block in r.iter_content(1 << 20):
                        bar.update(f.write(block))
                if total and os.path.getsize(part) < total:
                    raise DataError(f'download of {url} stopped at {os.path.getsize(part)} of {total} bytes; '
                                    f'run the same command again to resume. {offline}')
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f'the partial download {part} resumes next time') from None
    except requests.RequestException as e:
        raise DataError(f'download of {url} failed ({error_line(e)}). {offline} (rerunning resumes a partial download)') from None
    if size is not None and (got := os.path.getsize(part)) != size:
        wrong = f'{url} gave {got} bytes, expected {size}'
    elif sha256 is not None and (digest := _sha256(part)) != sha256:
        wrong = f'sha256 mismatch for {url}: expected {sha256}, got {digest}'
    else:
        os.replace(part, path)
        return path
    os.remove(part)
    raise DataError(f'{wrong}; the file was deleted, run again to download it afresh. {offline}')


def _sha256(path):
    with open(path, 'rb') as f:
        return hashlib.file_digest(f, 'sha256').hexdigest()


# ----------------------------------------------------------------------------- tokenizers
def _base_gpt2():
    return tiktoken.get_encoding('gpt2')  # the tests replace this with a small local Encoding


def gpt2_encoding(vocab=None):
    """GPT-2's BPE, or with vocab=N its first N-1 merge ranks + <|endoftext|> = N-1."""
    try:
        enc = _base_gpt2()
    except Exception as e:  # tiktoken raises requests' errors (or ValueError on a bad hash)
        raise DataError(f"the gpt2 tokenizer needs GPT-2's BPE files, which tiktoken downloads once and caches "
                        f"(TIKTOKEN_CACHE_DIR), and loading them failed ({error_line(e)}); offline, use "
                        f"--tokenizer byte or --tokenizer char") from None
    if vocab is None or vocab == enc.n_vocab:
        return enc
    if not 257 <= vocab < enc.n_vocab:
        raise DataError(f'--vocab must be between 257 and {enc.n_vocab} (the 256 byte tokens, merges, <|endoftext|>), '
                        f'got {vocab}')
    ranks = {b: r for b, r in enc._mergeable_ranks.items() if r < vocab - 1}
    return tiktoken.Encoding(name=f'gpt2_{vocab}', pat_str=enc._pat_str, mergeable_ranks=ranks,
                             special_tokens={'<|endoftext|>': vocab - 1})


def get_tokenizer(meta):
    """(encode, decode) for a dataset's meta dict (or its folder / meta.json path): encode(str) -> ids
    (char: a ValueError names characters outside the vocabulary); decode(ids) -> str, an id outside the
    vocabulary as U+FFFD (the battery's MASK as its mask_token); byte decode drops the row separators; json
    reads the folder's tokenizer.json (a meta dict: its tokenizer_file)."""
    copy = None
    if isinstance(meta, (str, os.PathLike)):
        path = os.path.join(meta, 'meta.json') if os.path.isdir(meta) else meta
        copy = os.path.join(os.path.dirname(path), TOKENIZER_JSON)
        with open(path) as f:
            meta = json.load(f)
    kind = meta['tokenizer']
    if kind == 'json':
        return _json_codec(meta, copy or meta.get('tokenizer_file'))
    if kind == 'gpt2':
        enc = gpt2_encoding(meta.get('bpe_vocab'))

        return (lambda s: enc.encode(s, allowed_special='all')), known_runs(enc.decode, enc.n_vocab)
    if kind == 'byte':
        return (lambda s: list(s.encode('utf-8')),
                lambda ids: bytes(int(i) for i in ids if 0 <= i < 256).decode('utf-8', errors='replace'))
    if kind != 'char':
        raise ValueError(f"unknown tokenizer {kind!r} in meta.json (expected one of {', '.join(TOKENIZERS)}, json)")
    itos = [meta['itos'][str(i) if isinstance(meta['itos'], dict) else i] for i in range(len(meta['itos']))]
    stoi, mask_token, mask_id = {c: i for i, c in enumerate(itos)}, meta.get('mask_token'), meta.get('mask_id')

    def encode(s):
        if bad := sorted({c for c in s if c not in stoi and c != mask_token}):
            raise ValueError(f"characters not in this dataset's vocabulary of {len(itos)} symbols: "
                             + ' '.join(repr(c) for c in bad))
        return [stoi[c] if c in stoi else mask_id for c in s]
    return encode, lambda ids: ''.join(itos[i] if 0 <= i < len(itos) else mask_token if i == mask_id and mask_token
                                       else '\ufffd' for i in ids)


def json_tokenizer(path):
    """(Tokenizer, the file's bytes, its absolute path) of --tokenizer=json:PATH: a tokenizer.json, or a folder
    holding one (a Parcae release's)."""
    file = os.path.join(path, TOKENIZER_JSON) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise DataError(f'--tokenizer=json:{path}: no such tokenizer.json, nor a folder holding one')
    with open(file, 'rb') as f:
        raw = f.read()
    return _read_json_tokenizer(raw, file), raw, os.path.abspath(file)


def _read_json_tokenizer(raw, file):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise DataError(f'{file} is read by the tokenizers package, which is not installed: pip install tokenizers') from None
    try:
        tok = Tokenizer.from_str(raw.decode('utf-8'))
    except Exception as e:   # the package raises plain Exceptions
        raise DataError(f'{file} is not a tokenizer.json that the tokenizers package reads ({error_line(e)})') from None
    if (n := json_vocab(tok)) > 65536:
        raise DataError(f'{file} has {n:,} token ids, more than the 65,536 that the uint16 .bin files hold')
    return tok


def json_vocab(tok):
    """One more than the largest id (added tokens included): the ids a model of this tokenizer needs rows for."""
    return max(tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1


def _json_codec(meta, file):
    """get_tokenizer's encode/decode of a json dataset, through the copy of its tokenizer.json: no special tokens
    added on encode, none skipped on decode, as the Parcae authors' Tokenizer."""
    sha = meta.get('tokenizer_sha256')
    if not file or not os.path.isfile(file):
        raise DataError(f'no tokenizer.json at {file}, the copy a json dataset keeps in its folder (sha256 {sha}): '
                        f'move the dataset back there, or prepare it again')
    with open(file, 'rb') as f:
        raw = f.read()
    if (got := hashlib.sha256(raw).hexdigest()) != sha:
        raise DataError(f'{file} is not the tokenizer.json the data was encoded with (sha256 {got[:8]}..., '
                        f'not {str(sha)[:8]}...): prepare the dataset again')
    tok = _read_json_tokenizer(raw, file)
    return (lambda s: tok.encode(s, add_special_tokens=False).ids,
            known_runs(lambda ids: tok.decode(ids, skip_special_tokens=False), json_vocab(tok)))


def known_runs(decode, n):
    """decode(ids) for ids of a model's vocabulary: runs of the tokenizer's ids decoded, U+FFFD for each id
    past its n (a padded vocabulary's rows, the battery's MASK)."""
    def decode_all(ids):
        runs = itertools.groupby((int(i) for i in ids), lambda i: 0 <= i < n)
        return ''.join(decode(list(run)) if ok else '\ufffd' * len(list(run)) for ok, run in runs)
    return decode_all


# ----------------------------------------------------------------------------- sources -> splits
@dataclass
class Split:
    pieces: Callable        # () -> iterator of str / bytes pieces; called once per pass
    kind: str = 'text'      # 'text': one stream; 'rows': lines (byte: ROW_SEP after each nonempty one);
                            # 'docs': each piece is a document
    special: bool = False   # gpt2: the literal <|endoftext|> is the end-of-text token
    lenient: bool = False   # bytes that are not UTF-8 become U+FFFD for text tokenizers


def _file_pieces(path, start=0, end=None, size=1 << 20):
    end = os.path.getsize(path) if end is None else end
    with open(path, 'rb') as f:
        f.seek(start)
        while start < end and (block := f.read(min(size, end - start))):
            start += len(block)
            yield block


def _member(path, filename):
    with zipfile.ZipFile(path) as z:
        return next((m for m in z.namelist() if m.rsplit('/', 1)[-1] == filename), None)


def text_file(paths, val_frac, kind='text', special=False):
    """A local text file: the first 1 - val_frac of it train, the rest val (nanoGPT's split; the cut
    moves to the next character, or row)."""
    path = paths[0]
    if os.path.isdir(path):
        raise DataError(f'--input {path} is a folder; this dataset takes a text file')
    if (n := os.path.getsize(path)) == 0:
        raise DataError(f'{path} is empty')
    with open(path, 'rb') as f:   # the cut moves to the start of a row, or of a UTF-8 character
        f.seek(cut := int(n * (1 - val_frac)))
        if kind == 'rows':
            cut += len(f.readline())
        else:
            while cut < n and (f.read(1)[0] & 0xC0) == 0x80:
                cut += 1
    return ({'train': Split(lambda: _file_pieces(path, 0, cut), kind, special),
             'val': Split(lambda: _file_pieces(path, cut, n), kind, special)},
            f'first {1 - val_frac:.0%} of {os.path.basename(path)} train, the rest val')


WIKITEXT_FILES = {'train': 'wiki.train.raw', 'val': 'wiki.valid.raw', 'test': 'wiki.test.raw'}


def _wiki_rows(path, member=None):   # the file at path, or its member: str pieces, newlines as text mode reads them
    with zipfile.ZipFile(path) if member else open(path, 'rb') as z:
        f = io.TextIOWrapper(z.open(member) if member else z, encoding='utf-8')
        yield from iter(lambda: f.read(1 << 20), '')


def wikitext103(paths, val_frac):
    """WikiText-103 raw: its official train/valid/test files (from its zip or folder), as rows."""
    path, zipped = paths[0], zipfile.is_zipfile(paths[0])
    if not zipped and not os.path.isdir(path):
        return text_file(paths, val_frac, kind='rows')
    found = {s: (path, _member(path, f)) if zipped else (os.path.join(path, f), None) for s, f in WIKITEXT_FILES.items()}
    if not all(m if zipped else os.path.isfile(p) for p, m in found.values()):
        raise DataError(f'{path} does not hold {", ".join(WIKITEXT_FILES.values())}')
    return ({s: Split(lambda pm=pm: _wiki_rows(*pm), 'rows') for s, pm in found.items()},
            'the official wiki.train/valid/test.raw files')


def enwik8(paths, val_frac):
    """enwik8's bytes (zipped or not): the first 90M train, the next 5M val, the last 5M test (a file of
    another size than 10^8 bytes in the same proportions)."""
    path = paths[0]
    if os.path.isdir(path):
        raise DataError(f'--input {path} is a folder; enwik8 takes enwik8.zip or the enwik8 file')
    zipped = zipfile.is_zipfile(path)
    with zipfile.ZipFile(path) if zipped else open(path, 'rb') as z:
        data = z.read(_member(path, 'enwik8') or z.namelist()[0]) if zipped else z.read()
    if (n := len(data)) == 0:
        raise DataError(f'{path} is empty')
    a, b = (90 * 10**6, 95 * 10**6) if n == 10**8 else (int(n * 0.9), int(n * 0.95))
    return ({s: Split(lambda d=d: [d], lenient=True) for s, d in (('train', data[:a]), ('val', data[a:b]), ('test', data[b:]))},
            f'first {a:,} bytes train, next {b - a:,} val, last {n - b:,} test')


TINYSTORIES_FILES = ['TinyStoriesV2-GPT4-train.txt', 'TinyStoriesV2-GPT4-valid.txt']


def tinystories(paths, val_frac):
    """TinyStoriesV2-GPT4's train and valid files (or their folder); the literal <|endoftext|> lines
    between stories are gpt2's end-of-text token."""
    if os.path.isdir(folder := paths[0]):
        paths = [os.path.join(folder, f) for f in TINYSTORIES_FILES]
        if not all(map(os.path.exists, paths)):
            raise DataError(f'{folder} does not hold {" and ".join(TINYSTORIES_FILES)}')
    if len(paths) == 1:
        return text_file(paths, val_frac, special=True)
    return ({s: Split(lambda p=p: _file_pieces(p), special=True) for s, p in zip(('train', 'val'), paths)},
            'the official train and valid files')


def _pyarrow():
    try:
        import pyarrow.parquet
    except ImportError:
        raise DataError('fineweb_edu reads parquet shards, which needs the optional extra pyarrow: pip install pyarrow') from None
    return pyarrow.parquet


def _parquet_docs(paths, start=0, stop=None):
    docs = (doc for p in paths for batch in _pyarrow().ParquetFile(p).iter_batches(columns=['text'], batch_size=1024)
            for doc in batch.column(0).to_pylist())
    return itertools.islice(docs, start, stop)


def fineweb_edu(paths, val_frac):
    """Parquet shards of documents (nanochat's karpathy/fineweb-edu-100b-shuffle, or a folder of them):
    all but the last train, the last val; one shard is split by documents."""
    if os.path.isdir(paths[0]):
        if not (paths := sorted(os.path.join(paths[0], f) for f in os.listdir(paths[0]) if f.endswith('.parquet'))):
            raise DataError('the --input folder holds no .parquet files')
    if not paths[0].endswith('.parquet'):
        return text_file(paths, val_frac)
    pq = _pyarrow()
    if len(paths) > 1:
        train, val, how = (paths[:-1],), (paths[-1:],), f'{len(paths) - 1} parquet shard(s) train, ' \
                                                        f'{os.path.basename(paths[-1])} val'
    else:
        cut = int(pq.ParquetFile(paths[0]).metadata.num_rows * (1 - val_frac))
        train, val, how = (paths, 0, cut), (paths, cut), f'first {cut:,} documents train, the rest val'
    return {'train': Split(lambda: _parquet_docs(*train), 'docs'), 'val': Split(lambda: _parquet_docs(*val), 'docs')}, how


def fineweb_files(shards):
    """--shards N train shards and the last shard, nanochat's val shard."""
    _pyarrow()
    if shards < 1:
        raise DataError('--shards must be at least 1')
    return [f'shard_{i:05d}.parquet' for i in [*range(shards), 1822]]


SHAKESPEARE = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare'
HF = 'https://huggingface.co/datasets'
# NAME -> (default tokenizer, base URL, its files (or shards -> its files), reader: the files (or --input)
# -> ({split: Split}, how it split them)); battery.py's are made offline
SOURCES = {
    'shakespeare_char': ('char', SHAKESPEARE, ['input.txt'], text_file),
    'shakespeare': ('gpt2', SHAKESPEARE, ['input.txt'], text_file),
    # the original S3 bucket (research.metamind.io) is gone; this is Stephen Merity's own mirror
    'wikitext103': ('gpt2', 'https://wikitext.smerity.com', ['wikitext-103-raw-v1.zip'], wikitext103),
    'enwik8': ('byte', 'http://mattmahoney.net/dc', ['enwik8.zip'], enwik8),
    'tinystories': ('gpt2', f'{HF}/roneneldan/TinyStories/resolve/main', TINYSTORIES_FILES, tinystories),
    'fineweb_edu': ('gpt2', f'{HF}/karpathy/fineweb-edu-100b-shuffle/resolve/main', fineweb_files, fineweb_edu),
    # passages for tools.lambada, which encodes them with the scored model's tokenizer ('char' only names the folder)
    'lambada': ('char', f'{HF}/EleutherAI/lambada_openai/resolve/900124bf3b8235c6daf21033af9948b3f07346c4/data',
                ['lambada_test.jsonl'], None),
    **{name: ('char', None, [], None) for name in DATASETS},
}


# ----------------------------------------------------------------------------- splits -> np.uint16 arrays
def _texts(split):
    """The split as str pieces (bytes decoded as UTF-8 across piece boundaries)."""
    decoder = codecs.getincrementaldecoder('utf-8')('replace' if split.lenient else 'strict')
    try:
        for piece in split.pieces():
            if split.kind == 'docs':
                yield piece + '\n\n'
            else:
                yield decoder.decode(piece) if isinstance(piece, bytes) else piece
        yield decoder.decode(b'', final=True)
    except UnicodeDecodeError as e:
        raise DataError(f'the input is not UTF-8 text ({e.reason} at a byte {e.object[e.start]:#x}); '
                        f'--tokenizer byte reads any bytes') from None


def _u16(b):
    return np.frombuffer(b, dtype=np.uint8).astype(np.uint16)


def _byte_rows(lines):
    # rows as the HuggingFace WikiText rows (a line with its '\n'); ROW_SEP after each nonempty one
    rows = [line.encode('utf-8') for line in lines if line.strip()]
    return np.insert(_u16(b''.join(rows)), np.cumsum([len(r) for r in rows], dtype=np.int64), ROW_SEP)


def _encode_byte(split):
    if split.kind == 'docs':
        yield from (np.append(_u16(doc.encode('utf-8')), np.uint16(ROW_SEP)) for doc in split.pieces())
    elif split.kind == 'text':
        yield from (_u16(p if isinstance(p, bytes) else p.encode('utf-8')) for p in split.pieces())
    else:
        carry = ''
        for t in _texts(split):
            *rows, carry = (carry + t).split('\n')
            yield _byte_rows([row + '\n' for row in rows])
        yield _byte_rows([carry])  # a last row without its newline


def _char_ids(text, codes):
    cps = np.frombuffer(text.encode('utf-32-le', 'surrogatepass'), dtype=np.uint32)
    ids = np.searchsorted(codes, cps)  # itos is sorted: the position is the id
    if (codes[np.minimum(ids, len(codes) - 1)] != cps).any():
        raise DataError('a character is missing from the char vocabulary')
    return ids.astype(np.uint16)


def _cut(buf, at):
    """A position <= at where GPT-2's pre-tokenizer always has a boundary: an ASCII printable
    character followed by a space or newline (no pattern crosses it, none looks behind)."""
    i = at
    while (j := max(buf.rfind(' ', 0, i), buf.rfind('\n', 0, i))) > 0:
        if '!' <= buf[j - 1] <= '~':
            return j
        i = j
    return None


def _word_cut(buf, at):
    """A position <= at of a space between two ASCII letters: byte-level BPE, Metaspace and whitespace
    pre-tokenizers all start a piece there (a tokenizer.json's pattern may join punctuation and newlines)."""
    i = at
    while (j := buf.rfind(' ', 0, i)) > 0:
        if re.fullmatch('[A-Za-z] [A-Za-z]', buf[j - 1:j + 2]):
            return j
        i = j
    return None


def _bpe_chunks(texts, size=1 << 20, cut=_cut):
    """Re-chunk a text stream at safe boundaries, so that encoding chunk by chunk (in parallel)
    gives exactly the tokens of encoding the whole text."""
    buf = ''
    for t in texts:
        buf += t
        while len(buf) >= 2 * size and (j := cut(buf, size)) is not None:
            yield buf[:j]
            buf = buf[j:]
    if buf:
        yield buf


def _batched(items, n):
    items = iter(items)
    while batch := list(itertools.islice(items, n)):
        yield batch


def _encode_gpt2(split, enc):
    threads = os.cpu_count() or 1
    if split.kind == 'docs':  # nanoGPT's convention: <|endoftext|> after each document
        for docs in _batched(split.pieces(), 1024):
            yield from (np.array(ids + [enc.eot_token], dtype=np.uint16)
                        for ids in enc.encode_ordinary_batch(docs, num_threads=threads))
        return
    for chunks in _batched(_bpe_chunks(_texts(split)), 4 * threads):
        if split.special:
            out = enc.encode_batch(chunks, num_threads=threads, allowed_special={'<|endoftext|>'})
        else:
            out = enc.encode_ordinary_batch(chunks, num_threads=threads)
        yield from (np.array(ids, dtype=np.uint16) for ids in out)


def _encode_json(split, tok):
    for chunks in _batched(_bpe_chunks(_texts(split), cut=_word_cut), 4 * (os.cpu_count() or 1)):
        yield from (np.array(e.ids, dtype=np.uint16) for e in tok.encode_batch(chunks, add_special_tokens=False))


def _encoder(tokenizer, enc, splits, meta):
    """split -> iterator of uint16 arrays, and the tokenizer's entries in meta."""
    if tokenizer == 'json':
        meta.update(vocab_size=json_vocab(enc))
        return lambda split: _encode_json(split, enc)
    if tokenizer == 'gpt2':
        meta.update(vocab_size=enc.n_vocab, eot_id=enc.eot_token)
        return lambda split: _encode_gpt2(split, enc)
    if tokenizer == 'byte':
        meta.update(vocab_size=257, row_separator=ROW_SEP)
        return _encode_byte
    itos = (SYNTH_CHARS if meta['name'] in DATASETS else
            sorted(set().union(*(set(t) for split in splits.values() for t in _texts(split)))))
    if len(itos) >= 65536:
        raise DataError(f'the text has {len(itos)} distinct characters, too many for uint16 ids')
    codes = np.array([ord(c) for c in itos], dtype=np.uint32)
    meta.update(vocab_size=len(itos), itos=itos, stoi={c: i for i, c in enumerate(itos)})
    return lambda split: (_char_ids(t, codes) for t in _texts(split))


# ----------------------------------------------------------------------------- prepare
def dataset_dirname(name, tokenizer=None, vocab=None, sha256=None):
    """data/<this>: NAME with the source's default tokenizer (always for a custom NAME), else
    NAME_<tokenizer>, NAME_gpt2_<vocab> with --vocab; json (any NAME): NAME_json_<first 8 of its sha256>."""
    if tokenizer == 'json':
        return f'{name}_json_{sha256[:8]}'
    default = SOURCES[name][0] if name in SOURCES else None
    if default is None or (tokenizer or default) == default and vocab is None:
        return name
    return f'{name}_{tokenizer or default}' + (f'_{vocab}' if vocab is not None else '')


def prepare_command(dirname, json_path='PATH'):
    """The command that makes data/<dirname>: dataset_dirname() read backwards (json_path: the tokenizer.json
    or release folder a json dataset names, which its folder's name does not hold)."""
    for name, (default, *_) in SOURCES.items():
        for tok in TOKENIZERS:
            if dirname == dataset_dirname(name, tok):
                return f'python prepare_data.py {name}' + (f' --tokenizer {tok}' if tok != default else '')
        if m := re.fullmatch(re.escape(name) + r'_gpt2_(\d+)', dirname):
            return f'python prepare_data.py {name} --tokenizer gpt2 --vocab {m.group(1)}'
        if re.fullmatch(re.escape(name) + r'_json_[0-9a-f]{8}', dirname):
            return f'python prepare_data.py {name} --tokenizer=json:{json_path}'
    if m := re.fullmatch(r'(.+)_json_[0-9a-f]{8}', dirname):
        return f'python prepare_data.py {m.group(1)} --input FILE --tokenizer=json:{json_path}'
    return f'python prepare_data.py {dirname} --input FILE'


def prepare(name, tokenizer=None, input=None, out_dir='data', seed=1337, url=None, vocab=None,
            n_train=100_000, n_val=6_000, shards=1, val_frac=0.1, quiet=False, max_train_tokens=None, n_test=0):
    """Write out_dir/<dataset_dirname(...)>/{train,val[,test]}.bin + meta.json; return the folder.
    max_train_tokens: train.bin keeps the first N tokens; None: TRAIN_CAPS' cap, 0: no cap."""
    check_name(name)
    if name == 'lambada':
        if tokenizer is not None or vocab is not None:
            raise DataError("lambada's passages are encoded by the model scoring them: --tokenizer and --vocab do not apply")
        return _lambada(input, out_dir, url, quiet)
    tokenizer, made = tokenizer or (SOURCES[name][0] if name in SOURCES else 'char'), prepare_command(name)
    spec, json_path = tokenizer, tokenizer.removeprefix('json:') if tokenizer.startswith('json:') else None
    tokenizer = 'json' if json_path is not None else tokenizer
    for wrong, msg in [
            (name not in SOURCES and input is None,
             f'unknown dataset {name!r}: one of {", ".join(SOURCES)}, or any name with --input FILE (a local text file)'),
            (name not in SOURCES and not made.endswith('--input FILE'),   # NAME_byte made as char would lie
             f'{name!r} is the folder that {made} writes; run that (with --input FILE to read a local copy)'),
            (tokenizer not in TOKENIZERS and not json_path,
             f'unknown tokenizer {spec!r}: one of {", ".join(TOKENIZERS)}, or json:PATH (a tokenizer.json, or a folder '
             f'holding one, such as a Parcae release)'),
            (tokenizer == 'json' and name in DATASETS,
             f'{name} is generated by battery.py; --tokenizer=json: encodes a text (a download source, or any NAME '
             f'with --input FILE)'),
            (vocab is not None and tokenizer != 'gpt2', '--vocab restricts the gpt2 tokenizer; use it with --tokenizer gpt2'),
            (name in DATASETS and input is not None, f'{name} is generated offline; --input does not apply to it'),
            (name in DATASETS and min(n_train, n_val) < 1, '--n_train and --n_val must be positive'),
            (n_test < 0 or n_test and name not in DATASETS, f'--n_test (test examples) is for a synthetic dataset ({", ".join(DATASETS)}), >= 0; got {n_test}'),
            (not 0 < val_frac < 1, f'--val_frac must be between 0 and 1, got {val_frac}'),
            (input is not None and not os.path.exists(input), f'--input {input}: no such file or folder'),
            ((max_train_tokens or 0) < 0, f'--max_train_tokens must be >= 0 (0: no cap), got {max_train_tokens}')]:
        if wrong:
            raise DataError(msg)
    cap = TRAIN_CAPS.get((name, tokenizer)) if max_train_tokens is None else max_train_tokens or None
    enc, files, sha = None, {}, None
    if tokenizer == 'gpt2':  # load the BPE before any download: fail early offline
        vocab = None if vocab == gpt2_encoding().n_vocab else vocab
        enc = gpt2_encoding(vocab)
    if tokenizer == 'json':  # so is a tokenizer.json; the folder keeps the bytes that were read
        enc, files[TOKENIZER_JSON], source = json_tokenizer(json_path)
        sha = hashlib.sha256(files[TOKENIZER_JSON]).hexdigest()
    _check_owned(dest := os.path.join(out_dir, dirname := dataset_dirname(name, tokenizer, vocab, sha)))
    meta = {'name': name, 'tokenizer': tokenizer, **({'bpe_vocab': vocab} if vocab is not None else {}),
            **({'train_cap': cap} if cap else {})}
    if sha:   # the copy's path, where a checkpoint's meta finds it
        meta.update(tokenizer_sha256=sha, tokenizer_source=source,
                    tokenizer_file=os.path.join(os.path.realpath(dest), TOKENIZER_JSON))
    if name in DATASETS:
        tokens, answers = _battery(name, tokenizer, enc, meta, seed, n_train, n_val, n_test)
    else:
        paths, meta['source'] = (([input], os.path.abspath(input)) if input is not None else
                                 _download(name, tokenizer, vocab, out_dir, url, shards, quiet,
                                           prepare_command(dirname, json_path)))
        splits, meta['split'] = (SOURCES[name][3] if name in SOURCES else text_file)(paths, val_frac)
        encode = _encoder(tokenizer, enc, splits, meta)
        tokens, answers = {s: encode(split) for s, split in splits.items()}, {}
    _write(dest, tokens, answers, meta, quiet, cap, files)
    return dest


def _download(name, tokenizer, vocab, out_dir, url, shards, quiet, command=None):
    """The source's files under out_dir/downloads (fetched once, checked), and their URL(s); command: the
    dataset's prepare_command where its folder's name does not tell it (json's tokenizer.json)."""
    _, base, files, _ = SOURCES[name]
    files = files(shards) if callable(files) else files
    urls = _file_urls(url or os.environ.get('PREPARE_DATA_URL') or base, files)
    # the offline hint repeats this command: its tokenizer, folder and shards
    again = ((command or prepare_command(dataset_dirname(name, tokenizer, vocab))).removeprefix('python prepare_data.py ')
             + (f' --shards {shards}' if shards != 1 else '') + (f' --out_dir {out_dir}' if out_dir != 'data' else ''))
    paths = [download(u, os.path.join(out_dir, 'downloads', f), SHA256.get(f), SIZES.get(f), name=again, quiet=quiet)
             for u, f in zip(urls, files)]
    return paths, urls if len(urls) > 1 else urls[0]


def _lambada(input, out_dir, url, quiet):
    """out_dir/lambada/lambada_test.jsonl, downloaded (or --input FILE), checked: LAMBADA_PASSAGES rows of
    {"text"} (tools.lambada scores them). Returns the folder."""
    dest, file = os.path.join(out_dir, 'lambada'), 'lambada_test.jsonl'
    _check_owned(dest)
    if input is None:
        input = _download('lambada', None, None, out_dir, url, 1, quiet)[0][0]
    elif not os.path.isfile(input):
        raise DataError(f"--input {input}: no such file")
    try:
        with open(input, encoding='utf-8') as f:
            rows = [ln for ln in f if ln.strip()]
    except UnicodeDecodeError:
        raise DataError(f"{input} is not UTF-8 text") from None
    for n, row in enumerate(rows, 1):
        try:
            text = json.loads(row).get('text')
        except (ValueError, AttributeError):
            text = None
        if not isinstance(text, str):
            raise DataError(f'{input}:{n}: not a JSON row {{"text": passage}}')
    if len(rows) != LAMBADA_PASSAGES:
        raise DataError(f"{input} holds {len(rows)} passages, not lambada_openai's {LAMBADA_PASSAGES}: a cut-short or another file")
    if (digest := _sha256(input)) != SHA256[file]:
        print(f"note: {input} is not lambada_openai's {file} (sha256 {digest[:16]}...): its scores compare "
              f"with lambada_openai's only if its passages are the same", file=sys.stderr)
    swap_in(dest, lambda new: shutil.copyfile(input, os.path.join(new, file)), quiet)
    if not quiet:
        print(f"wrote {os.path.join(dest, file)}: {len(rows)} passages")
    return dest


def _battery(name, tokenizer, enc, meta, seed, n_train, n_val, n_test):
    """battery.py's examples, one a line: {split: [ids]}, and {split: answer marks} ({split}_answers.bin:
    uint8, 1 per answer token, the holes of hole fine-tuning); train from seed, val from seed + VAL_SEED_OFFSET,
    test (n_test > 0) from seed + TEST_SEED_OFFSET."""
    try:
        examples = synthetic_split(seed, n_train, n_val, DATASETS[name], n_test=n_test)
    except ValueError as e:
        raise DataError(str(e)) from None
    meta.update(source='synthetic skill battery (battery.synthetic_split)', tasks=list(DATASETS[name]),
                seed=seed, val_seed=seed + VAL_SEED_OFFSET, n_train=n_train, n_val=n_val,
                split='train: seed; val: seed + VAL_SEED_OFFSET, minus examples in train' + (n_test > 0) *
                '; test: seed + TEST_SEED_OFFSET, minus examples in train or val', **({'n_test': n_test} if n_test else {}))
    _encoder(tokenizer, enc, {}, meta)
    meta.update(mask_id=meta['vocab_size'], **({'mask_token': SYNTH_MASK_TOKEN} if tokenizer == 'char' else {}))
    encoded = {s: synthetic_ids(ex, get_tokenizer(meta)[0]) for s, ex in examples.items()}
    return {s: [ids] for s, (ids, _) in encoded.items()}, {s: marks for s, (_, marks) in encoded.items()}


# ----------------------------------------------------------------------------- writing: whole, or not at all
# what _write puts there (a json dataset's tokenizer.json too), tools.lambada's passages, and macOS's
OWN_FILE = re.compile(r'(train|val|test)(_answers)?\.bin|meta\.json|tokenizer\.json|lambada_test\.jsonl|\.DS_Store')


def _check_owned(dest):
    """A dataset is replaced as a whole folder: one that holds files this script does not write
    (nanoGPT's input.txt and prepare.py, notes) is refused before any work, never deleted."""
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise DataError(f'{dest} is a file, not a dataset folder: move it aside first')
    if other := sorted(f for f in os.listdir(dest) if not OWN_FILE.fullmatch(f)) if os.path.isdir(dest) else []:
        raise DataError(f'{dest} holds files prepare_data.py did not write ({", ".join(other[:5])}'
                        f'{", ..." if len(other) > 5 else ""}), which replacing the dataset would delete: '
                        f'move them out, or prepare into another --out_dir')


def _remove_stale(parent, name, quiet):
    """What a prepare killed outright (kill -9, a lost node) left: its .NAME.new<pid>@<host> is removed, its
    .NAME.old<pid>@<host> (the previous dataset) put back if dest is missing; another host's are left."""
    host, dest = socket.gethostname(), os.path.join(parent, name)
    for entry in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        m = re.fullmatch(rf'\.{re.escape(name)}\.(new|old)(\d+)(?:@(.+))?', entry)
        if not m or not os.path.isdir(path := os.path.join(parent, entry)):
            continue
        what, pid, where = m.group(1), m.group(2), m.group(3) or host
        if where != host:
            print(f'note: {path} is the work of a prepare_data.py on {where}; remove it if none runs there', file=sys.stderr)
        elif _alive(int(pid)):
            continue
        elif what == 'old' and not os.path.exists(dest):
            os.replace(path, dest)
            print(f'note: put back {dest}, set aside by a prepare_data.py (pid {pid}) that was killed', file=sys.stderr)
        else:
            shutil.rmtree(path)
            if not quiet:
                print(f'removed {path}, left by a prepare_data.py (pid {pid}) that was killed')


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process
        pass
    return True


def _write_file(path, write):
    """write(f) into path, and what it returns; a failed write (a full disk) names the file."""
    try:
        with open(path, 'wb') as f:
            return write(f)
    except OSError as e:
        e.filename = e.filename or path
        raise


def _write_ids(f, chunks, cap, bar):
    """The uint16 arrays into f, up to cap tokens (None: all); how many, and the largest id."""
    n = top = 0
    for ids in chunks:
        ids = np.ascontiguousarray(ids[:cap - n] if cap else ids, dtype=np.uint16)
        f.write(ids.data)   # tofile's errors lack errno
        n, top = n + len(ids), max(top, int(ids.max(initial=0)))
        bar.update(len(ids))
        if n == cap:
            break
    return n, top


def swap_in(dest, fill, quiet):
    """fill(folder) writes the files in .NAME.new<pid>@<host>, which is then swapped in whole for dest: a failure
    or a signal leaves the previous one as it was, open files of it readable. Returns dest's real path."""
    parent, name = os.path.split(os.path.realpath(dest))   # a linked folder is replaced where it lives
    dest = os.path.join(parent, name)
    _remove_stale(parent, name, quiet)
    tag = f'{os.getpid()}@{socket.gethostname()}'
    new, old = os.path.join(parent, f'.{name}.new{tag}'), os.path.join(parent, f'.{name}.old{tag}')
    os.makedirs(new)
    try:
        fill(new)
        if os.path.isdir(dest):
            os.replace(dest, old)
        try:
            os.replace(new, dest)
        except BaseException:
            if os.path.isdir(old):
                os.replace(old, dest)
            raise
    finally:
        if os.path.isdir(new):
            shutil.rmtree(new)
    if os.path.isdir(old):
        shutil.rmtree(old)
    return dest


def _write(dest, tokens, answers, meta, quiet, cap=None, files=None):
    """The dataset (split -> uint16 arrays; train.bin stops at cap), files (name -> bytes), meta.json last, swapped
    in whole (swap_in)."""
    def fill(new):
        for name, raw in (files or {}).items():
            _write_file(os.path.join(new, name), lambda f: f.write(raw))
        for s, chunks in tokens.items():
            with tqdm(desc=f'{os.path.basename(dest)}/{s}.bin', unit='tok', unit_scale=True, disable=quiet) as bar:
                n, top = _write_file(os.path.join(new, f'{s}.bin'),
                                     lambda f: _write_ids(f, chunks, cap if s == 'train' else None, bar))
            if n < 2:
                raise DataError(f'the {s} split has {n} tokens; the input is too small to split'
                                + (f' ({dest} is unchanged)' if os.path.isdir(dest) else ''))
            if s in answers:
                _write_file(os.path.join(new, f'{s}_answers.bin'), lambda f: f.write(answers[s].tobytes()))
            meta[f'{s}_tokens'] = n
            meta.setdefault('max_id', {})[s] = top   # what a reader checks instead of reading every id
        _write_file(os.path.join(new, 'meta.json'),
                    lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False).encode('utf-8')))
    dest = swap_in(dest, fill, quiet)
    if not quiet:
        counts = ', '.join(f'{s} {meta[s + "_tokens"]:,}' for s in tokens)
        print(f'wrote {dest}: {meta["tokenizer"]} tokenizer, vocab_size {meta["vocab_size"]}, tokens: {counts}')


# ----------------------------------------------------------------------------- the command line
class Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, not argparse's usage block
        print(f'error: {message} (see python prepare_data.py --help)', file=sys.stderr)
        sys.exit(2)


def tokenizer_arg(text):
    if text in TOKENIZERS or text.startswith('json:') and len(text) > 5:
        return text
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(TOKENIZERS)}, json:PATH)")


STOPPED_BY = None   # the signal that stopped the command line


def _stop(signum, frame):   # SIGTERM (a scheduler), SIGHUP (a closed terminal): Ctrl-C's path
    global STOPPED_BY
    STOPPED_BY = signum
    raise KeyboardInterrupt


def main(argv=None):
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:     # nohup's SIGHUP stays ignored
            signal.signal(sig, _stop)
    p = Parser(description='Prepare a dataset: data/<name>/{train,val}.bin + meta.json (see prepare_data.py\'s docstring).')
    p.add_argument('name', help=f'{", ".join(SOURCES)}, or any name with --input FILE')
    p.add_argument('--tokenizer', type=tokenizer_arg, help='gpt2, byte, char, or json:PATH (a tokenizer.json, or a folder holding one such '
                   'as a Parcae release; needs the tokenizers package); default: the source\'s (char for a custom NAME)')
    p.add_argument('--input', help='a local file (or the downloaded archive/folder) instead of downloading')
    p.add_argument('--out_dir', default='data')
    p.add_argument('--seed', type=int, default=1337, help='synthetic: the train seed')
    p.add_argument('--url', help='base URL to download from (or env PREPARE_DATA_URL)')
    p.add_argument('--vocab', type=int, help='gpt2: restrict to the first N-1 merge ranks + <|endoftext|>')
    p.add_argument('--n_train', type=int, default=100_000, help='synthetic: train examples')
    p.add_argument('--n_val', type=int, default=6_000, help='synthetic: val examples')
    p.add_argument('--n_test', type=int, default=0, help='synthetic: test examples (test.bin), none in train or val')
    p.add_argument('--shards', type=int, default=1, help='fineweb_edu: train shards to download')
    p.add_argument('--val_frac', type=float, default=0.1, help='val fraction when splitting one text file')
    p.add_argument('--max_train_tokens', type=int, help='train.bin keeps its first N tokens; 0: all (default: all, '
                   'except tinystories --tokenizer byte: 250M, the workspace paper\'s cap)')
    args = p.parse_args(argv)
    try:
        prepare(**vars(args))
    except (DataError, OSError) as e:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            free = shutil.disk_usage(args.out_dir if os.path.isdir(args.out_dir) else '.').free
            e = (f'no space left on the device ({errno.errorcode[e.errno]}) writing {e.filename or args.out_dir}: '
                 f'{free / 2**20:,.1f} MiB free there; free some space and run the same command again (a previous '
                 f'dataset there is unchanged, a download resumes)')
        print(f'error: {e}', file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:   # _write swaps a dataset in only whole, and removes its work folder
        name = signal.Signals(STOPPED_BY).name if STOPPED_BY else 'Ctrl-C'
        print(f"interrupted ({name}): {e.args[0] if e.args else 'any previous dataset there is unchanged'}", file=sys.stderr)
        sys.exit(128 + (STOPPED_BY or signal.SIGINT))


if __name__ == '__main__':
    main()
