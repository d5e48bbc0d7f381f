"""prepare_data.py: local files, downloads through a local HTTP server, the three tokenizers
(gpt2 through a small local tiktoken Encoding), and the synthetic battery. Never downloads."""
import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import requests
import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str

import battery as B
import prepare_data as P

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "  indented   line  with   spaces \n\n\nthe end and the thing, 1234 + 56 = 1290; caf\u00e9 \u00fcber \u2014 ok?\n") * 40


def cli(*args, check=False):
    env = {**os.environ, 'NO_PROXY': '127.0.0.1,localhost'}
    env.pop('PREPARE_DATA_URL', None)
    return subprocess.run([sys.executable, os.path.join(ROOT, 'prepare_data.py'), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def load(d):
    meta = json.load(open(os.path.join(d, 'meta.json')))
    bins = {s: np.fromfile(os.path.join(d, f'{s}.bin'), dtype=np.uint16)
            for s in ('train', 'val', 'test') if os.path.exists(os.path.join(d, f'{s}.bin'))}
    for s, ids in bins.items():
        assert meta[f'{s}_tokens'] == len(ids) and meta['max_id'][s] == ids.max()   # what data.py checks at start
        assert ids.max() < meta['vocab_size'] or (meta.get('mask_id') is not None and ids.max() < meta['mask_id'])
    return meta, bins


def assert_clean_error(p, *words):
    assert p.returncode == 2, p.stderr
    assert 'Traceback' not in p.stderr, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith('error: '), p.stderr
    for w in words:
        assert w in line, line


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv('NO_PROXY', '127.0.0.1,localhost')
    monkeypatch.delenv('PREPARE_DATA_URL', raising=False)


# -----------------------------------------------------------------------------
# a local HTTP server on 127.0.0.1 with Range support

class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        srv = self.server
        srv.log.append((self.path, self.headers.get('Range')))
        body = srv.files.get(self.path.split('?')[0])
        if body is None:
            self.send_error(404)
            return
        start, rng = 0, self.headers.get('Range')
        if rng and srv.ranges:
            start = int(re.match(r'bytes=(\d+)-', rng).group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header('Content-Range', f'bytes */{len(body)}')
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            self.send_response(206)
            self.send_header('Content-Range', f'bytes {start}-{len(body) - 1}/{len(body)}')
        else:
            self.send_response(200)
        self.send_header('Content-Length', str(len(body) - start))
        for k, v in srv.headers_out.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body[start:])

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    srv.files, srv.log, srv.ranges, srv.headers_out = {}, [], True, {}
    srv.url = f'http://127.0.0.1:{srv.server_address[1]}'
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def closed_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -----------------------------------------------------------------------------
# a small GPT-2-style BPE: GPT-2's pre-tokenizer, 256 byte tokens and a few merges

def small_encoding():
    ranks = {bytes([i]): i for i in range(256)}
    for m in [b'th', b'he', b'the', b' t', b' the', b'in', b'ing', b' a', b'an', b'and', b' and',
              b'er', b'ea', b'pe', b'ak', b' s', b'sp', b'eak', b' speak', b'\n\n', b'  ', b'12', b'34']:
        ranks[m] = len(ranks)
    return tiktoken.Encoding(name='small_gpt2', pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={'<|endoftext|>': len(ranks)})


@pytest.fixture
def small_bpe(monkeypatch):
    enc = small_encoding()
    monkeypatch.setattr(P, '_base_gpt2', lambda: enc)
    return enc


# -----------------------------------------------------------------------------
# local files

def test_local_file_char(tmp_path):
    src = tmp_path / 'book.txt'
    src.write_text(TEXT, encoding='utf-8')
    d = P.prepare('mybook', input=str(src), out_dir=str(tmp_path / 'data'), quiet=True)
    assert d == str(tmp_path / 'data' / 'mybook')
    meta, bins = load(d)
    assert meta['tokenizer'] == 'char' and meta['itos'] == sorted(set(TEXT))
    assert meta['vocab_size'] == len(meta['itos']) and meta['stoi'] == {c: i for i, c in enumerate(meta['itos'])}
    assert meta['source'] == str(src) and set(bins) == {'train', 'val'}
    # nanoGPT's split: the first 90% of the text (the text is ASCII up to the cut's neighbourhood)
    n_bytes = len(TEXT.encode())
    assert len(TEXT[:len(bins['train'])].encode()) >= int(0.9 * n_bytes)
    encode, decode = P.get_tokenizer(d)
    assert decode(bins['train'].tolist()) + decode(bins['val'].tolist()) == TEXT
    assert encode(TEXT[:500]) == bins['train'][:500].tolist()


def test_char_round_trip_and_unknown_characters(tmp_path):
    encode, decode = P.get_tokenizer({'tokenizer': 'char', 'itos': list('\n abc'), 'vocab_size': 5})
    assert decode(encode('abc cab\n')) == 'abc cab\n'
    with pytest.raises(ValueError, match=r"'x'.*'\\t'|'\\t'.*'x'") as e:
        encode('abx\tcx')
    assert 'vocabulary of 5 symbols' in str(e.value)


def test_cli_local_file_and_clean_errors(tmp_path):
    src = tmp_path / 'notes.txt'
    src.write_text(TEXT, encoding='utf-8')
    p = cli('notes', '--input', src, '--out_dir', tmp_path / 'data', '--tokenizer', 'byte')
    assert p.returncode == 0, p.stderr
    meta, bins = load(tmp_path / 'data' / 'notes')  # a custom NAME keeps its name with any tokenizer
    assert meta['vocab_size'] == 257 and meta['tokenizer'] == 'byte'
    raw = TEXT.encode()
    assert bins['train'].tolist() + bins['val'].tolist() == list(raw)  # plain text: raw bytes, no separators
    assert_clean_error(cli('notes', '--input', tmp_path / 'missing.txt', '--out_dir', tmp_path / 'data'),
                       'no such file')
    assert_clean_error(cli('nosuchdataset', '--out_dir', tmp_path / 'data'), 'unknown dataset', '--input')
    assert_clean_error(cli('notes', '--input', src, '--vocab', '1000', '--out_dir', tmp_path / 'data'), '--vocab')
    (tmp_path / 'latin1.txt').write_bytes('caf\u00e9 na\u00efve '.encode('latin-1') * 10)
    assert_clean_error(cli('latin', '--input', tmp_path / 'latin1.txt', '--out_dir', tmp_path / 'data'),
                       'not UTF-8', '--tokenizer byte')


# -----------------------------------------------------------------------------
# downloads through the local server

def test_download_progress_checksum_and_meta(server, tmp_path, monkeypatch, capsys):
    body = TEXT.encode()
    server.files['/input.txt'] = body
    monkeypatch.setitem(P.SHA256, 'input.txt', hashlib.sha256(body).hexdigest())
    monkeypatch.setitem(P.SIZES, 'input.txt', len(body))
    d = P.prepare('shakespeare_char', url=server.url, out_dir=str(tmp_path))
    err = capsys.readouterr().err
    assert 'input.txt' in err and '100%' in err  # the tqdm bar
    assert open(tmp_path / 'downloads' / 'input.txt', 'rb').read() == body
    assert not os.path.exists(tmp_path / 'downloads' / 'input.txt.part')
    meta, bins = load(d)
    assert meta['source'] == f'{server.url}/input.txt' and meta['tokenizer'] == 'char'
    assert P.get_tokenizer(meta)[1](bins['train'].tolist() + bins['val'].tolist()) == TEXT
    # a second run reuses the download
    server.log.clear()
    P.prepare('shakespeare_char', url=server.url, out_dir=str(tmp_path), quiet=True)
    assert server.log == []
    # the environment variable also points it at a mirror; a full file URL works for one-file sources
    monkeypatch.setenv('PREPARE_DATA_URL', server.url)
    assert P._file_urls(server.url + '/input.txt', ['input.txt']) == [server.url + '/input.txt']
    os.remove(tmp_path / 'downloads' / 'input.txt')
    P.prepare('shakespeare_char', out_dir=str(tmp_path), quiet=True)
    assert server.log == [('/input.txt', None)]


def test_download_resumes_with_range(server, tmp_path, capsys):
    body = bytes(range(256)) * 40
    server.files['/f.bin'] = body
    dest = tmp_path / 'f.bin'
    (tmp_path / 'f.bin.part').write_bytes(body[:3000])
    P.download(f'{server.url}/f.bin', str(dest), sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    assert server.log == [('/f.bin', 'bytes=3000-')]
    assert dest.read_bytes() == body and not (tmp_path / 'f.bin.part').exists()
    assert '100%' in capsys.readouterr().err
    # a .part that already holds the whole file (416 from the server) is finished, not refetched
    (tmp_path / 'g.bin.part').write_bytes(body)
    server.files['/g.bin'] = body
    P.download(f'{server.url}/g.bin', str(tmp_path / 'g.bin'), size=len(body), quiet=True)
    assert (tmp_path / 'g.bin').read_bytes() == body
    # a server that ignores Range: start over instead of appending the whole file to the .part
    server.ranges = False
    (tmp_path / 'h.bin.part').write_bytes(body[:100])
    server.files['/h.bin'] = body
    P.download(f'{server.url}/h.bin', str(tmp_path / 'h.bin'), quiet=True)
    assert (tmp_path / 'h.bin').read_bytes() == body


def test_checksum_mismatch(server, tmp_path, monkeypatch):
    body = b'not the file you were looking for\n' * 50
    server.files['/input.txt'] = body
    monkeypatch.delitem(P.SIZES, 'input.txt')  # reach the sha256 check (the size check fires first)
    with pytest.raises(P.DataError, match='sha256 mismatch') as e:
        P.prepare('shakespeare_char', url=server.url, out_dir=str(tmp_path), quiet=True)
    assert P.SHA256['input.txt'] in str(e.value) and hashlib.sha256(body).hexdigest() in str(e.value)
    assert '--input FILE' in str(e.value)
    assert not os.listdir(tmp_path / 'downloads')  # the bad file is gone, nothing half-written remains
    # a sha256 published by the server (HuggingFace's X-Linked-Etag) is checked too
    server.headers_out['X-Linked-Etag'] = '"' + 'ab' * 32 + '"'
    server.files['/x.txt'] = body
    with pytest.raises(P.DataError, match='sha256 mismatch'):
        P.download(f'{server.url}/x.txt', str(tmp_path / 'x.txt'), quiet=True)
    server.headers_out['X-Linked-Etag'] = '"' + hashlib.sha256(body).hexdigest() + '"'
    P.download(f'{server.url}/x.txt', str(tmp_path / 'x.txt'), quiet=True)
    # through the command line: the (published) size does not match -> one clear line, exit 2
    assert_clean_error(cli('shakespeare_char', '--url', server.url, '--out_dir', tmp_path / 'cli'),
                       'expected 1115394', '--input FILE')


def test_server_down_names_input(tmp_path):
    p = cli('shakespeare_char', '--url', f'http://127.0.0.1:{closed_port()}', '--out_dir', tmp_path)
    assert_clean_error(p, 'download of', 'failed', f'python prepare_data.py shakespeare_char --out_dir {tmp_path} --input FILE')
    assert len(p.stderr.strip().splitlines()) == 1
    with pytest.raises(P.DataError, match='--input FILE'):
        P.download(f'http://127.0.0.1:{closed_port()}/x', str(tmp_path / 'x'), name='enwik8', quiet=True)


def test_tinystories_download_cli(server, tmp_path):
    train = b'Once upon a time there was a cat.\n<|endoftext|>\nThe end of a story.\n' * 30
    valid = b'A short story.\n<|endoftext|>\n' * 10
    server.files['/TinyStoriesV2-GPT4-train.txt'] = train
    server.files['/TinyStoriesV2-GPT4-valid.txt'] = valid
    p = cli('tinystories', '--tokenizer', 'byte', '--url', server.url, '--out_dir', tmp_path)
    assert p.returncode == 0, p.stderr
    meta, bins = load(tmp_path / 'tinystories_byte')  # a non-default tokenizer gets a suffix
    assert bins['train'].tobytes() == np.frombuffer(train, np.uint8).astype(np.uint16).tobytes()  # raw bytes
    assert bins['val'].tolist() == list(valid)
    assert meta['source'] == [f'{server.url}/TinyStoriesV2-GPT4-train.txt', f'{server.url}/TinyStoriesV2-GPT4-valid.txt']


# -----------------------------------------------------------------------------
# gpt2 with a small local tiktoken Encoding

def test_gpt2_local_encoding(tmp_path, small_bpe):
    src = tmp_path / 'play.txt'
    src.write_text(TEXT, encoding='utf-8')
    d = P.prepare('shakespeare', input=str(src), out_dir=str(tmp_path), quiet=True)
    assert d == str(tmp_path / 'shakespeare')
    meta, bins = load(d)
    assert meta['tokenizer'] == 'gpt2' and meta['vocab_size'] == small_bpe.n_vocab
    assert meta['eot_id'] == small_bpe.eot_token and 'bpe_vocab' not in meta
    cut = int(len(TEXT.encode()) * 0.9)
    assert bins['train'].tolist() == small_bpe.encode_ordinary(TEXT.encode()[:cut].decode())
    assert bins['train'].max() >= 256  # merges were used
    encode, decode = P.get_tokenizer(meta)
    assert decode(bins['train'].tolist() + bins['val'].tolist()) == TEXT
    assert encode('the end<|endoftext|>')[-1] == small_bpe.eot_token


def test_gpt2_chunked_encoding_is_exact(small_bpe):
    # encoding in chunks (for parallel, streaming encoding) must give the tokens of the whole text
    rng = np.random.default_rng(0)
    pieces = ['the', ' ', '  ', '\n', '\n\n', ' \n', 'speak', '123', '4', "'s", '!', '?!', ' \u00e9', '\u2014', '\t', 'and']
    text = ''.join(rng.choice(pieces, size=3000))
    chunks = list(P._bpe_chunks(iter([text[i:i + 37] for i in range(0, len(text), 37)]), size=64))
    assert len(chunks) > 10 and ''.join(chunks) == text
    assert [t for c in chunks for t in small_bpe.encode_ordinary(c)] == small_bpe.encode_ordinary(text)


def test_gpt2_vocab_restriction(tmp_path, small_bpe):
    src = tmp_path / 'play.txt'
    src.write_text(TEXT, encoding='utf-8')
    d = P.prepare('shakespeare', input=str(src), out_dir=str(tmp_path), vocab=262, quiet=True)
    assert os.path.basename(d) == 'shakespeare_gpt2_262'
    meta, bins = load(d)
    assert meta['vocab_size'] == 262 and meta['bpe_vocab'] == 262 and meta['eot_id'] == 261
    enc = P.gpt2_encoding(262)
    assert enc.n_vocab == 262 and enc.encode('<|endoftext|>', allowed_special='all') == [261]
    assert bins['train'].max() < 261 and bins['train'].max() >= 256  # only the first 5 merges
    assert P.get_tokenizer(meta)[1](bins['train'].tolist() + bins['val'].tolist()) == TEXT
    assert len(bins['train']) > len(load(P.prepare('shakespeare', input=str(src), out_dir=str(tmp_path),
                                                   quiet=True))[1]['train'])  # fewer merges: more tokens
    with pytest.raises(P.DataError, match='--vocab'):
        P.gpt2_encoding(100)


def test_gpt2_tinystories_endoftext_and_offline_error(tmp_path, small_bpe, monkeypatch):
    (tmp_path / 'ts').mkdir()
    (tmp_path / 'ts' / 'TinyStoriesV2-GPT4-train.txt').write_text('the cat.\n<|endoftext|>\nthe dog.\n' * 20)
    (tmp_path / 'ts' / 'TinyStoriesV2-GPT4-valid.txt').write_text('and then.\n<|endoftext|>\n' * 5)
    meta, bins = load(P.prepare('tinystories', input=str(tmp_path / 'ts'), out_dir=str(tmp_path), quiet=True))
    assert (bins['train'] == small_bpe.eot_token).sum() == 20 and (bins['val'] == small_bpe.eot_token).sum() == 5

    def offline():
        raise requests.ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'")
    monkeypatch.setattr(P, '_base_gpt2', offline)
    with pytest.raises(P.DataError, match='--tokenizer byte or --tokenizer char'):
        P.prepare('shakespeare', input=str(tmp_path / 'ts' / 'TinyStoriesV2-GPT4-valid.txt'), out_dir=str(tmp_path))


# -----------------------------------------------------------------------------
# byte tokenizer: WikiText rows and enwik8

def test_byte_row_separators_wikitext(tmp_path):
    rows = {'train': [' = Valkyria Chronicles III = \n', ' \n', '', 'Senj\u014d no Valkyria 3 .\n', '\n', ' Last row \n'],
            'valid': [' = A = \n', ' \n', ' text \n'], 'test': [' x \n', ' y']}
    z = tmp_path / 'wikitext-103-raw-v1.zip'
    with zipfile.ZipFile(z, 'w') as f:
        for s, r in rows.items():
            f.writestr(f'wikitext-103-raw/wiki.{s}.raw', ''.join(r))
    meta, bins = load(P.prepare('wikitext103', tokenizer='byte', input=str(z), out_dir=str(tmp_path), quiet=True))
    assert meta['row_separator'] == 256 and meta['vocab_size'] == 257

    def expect(rs):  # UTF-8 bytes of each nonempty row, 256 after it
        return [t for r in rs if r.strip() for t in [*r.encode('utf-8'), 256]]
    assert bins['train'].tolist() == expect(rows['train'])
    assert bins['val'].tolist() == expect(rows['valid']) and bins['test'].tolist() == expect(rows['test'])
    # decode drops the separators
    assert P.get_tokenizer(meta)[1](bins['train'].tolist()) == ''.join(r for r in rows['train'] if r.strip())


def test_enwik8_split_raw_bytes(tmp_path):
    data = bytes(np.random.default_rng(0).integers(0, 256, 2000, dtype=np.uint8))  # not UTF-8
    z = tmp_path / 'enwik8.zip'
    with zipfile.ZipFile(z, 'w') as f:
        f.writestr('enwik8', data)
    d = P.prepare('enwik8', input=str(z), out_dir=str(tmp_path), quiet=True)
    assert os.path.basename(d) == 'enwik8'  # byte is enwik8's default
    meta, bins = load(d)
    assert [len(bins[s]) for s in ('train', 'val', 'test')] == [1800, 100, 100]  # 90 / 5 / 5
    assert np.concatenate([bins['train'], bins['val'], bins['test']]).tolist() == list(data)
    # re-preparing with another tokenizer reads the same file leniently (not UTF-8 -> U+FFFD)
    meta, bins = load(P.prepare('enwik8', tokenizer='char', input=str(z), out_dir=str(tmp_path), quiet=True))
    assert '\ufffd' in meta['itos']


# -----------------------------------------------------------------------------
# the synthetic battery

def check_answer(task, prompt, answer, suffix=''):
    """Solves the example from its text alone, by the task's definition."""
    assert answer.startswith(' ') and not prompt.endswith(' ') and (suffix == '' or suffix.startswith(' '))
    words, a, after = prompt.split(), answer[1:], suffix.split()
    assert words[0] == task.replace('_', '')
    assert (suffix != '') == (task in B.FUTURE)
    if task in B.FAR:       # the near task's example with 8-12 filler words between the answer and its evidence
        gap = B.evidence_gap(prompt, answer, suffix)
        filler = suffix[1:gap - 1].split(' ')
        assert 8 <= len(filler) <= 12 and all(len(w) == 3 and w.isalpha() for w in filler), suffix
        return check_answer(task[:-4], prompt.replace('far', '', 1), answer, suffix[gap - 1:])
    if task == 'mem_s4':
        pairs = dict(w.split('=') for w in words[1:5])
        assert len(pairs) == len(set(pairs.values())) == 4 and words[-3] == '?' and len(words) > 11
        return a == pairs[words[-2]]
    if task == 'mem_l':
        return a == words[1] and len(words) > 12
    if task == 'add':
        x, y = words[1].split('+')
        return int(a) == int(x) + int(y)
    if task == 'state_l':
        return int(a) == (int(words[1]) + sum(int(w) for w in words[2:-1])) % 10
    if task == 'sort_rel':
        xs = words[1:-3]
        return words[-3] == '?' and int(a) == sorted(xs).index(words[-2]) + 1
    if task == 'cmp':
        x, y = int(words[1]), int(words[2])
        return a == ('<' if x < y else '>' if x > y else '=')
    if task == 'ind_r':
        return after == ['=', a]
    if task == 'state_inv':
        return after[-2] == '=' and (int(a) + sum(int(w) for w in after[:-2])) % 10 == int(after[-1])
    if task == 'perm_h1':
        return sorted([a] + after) == [str(i) for i in range(len(after) + 1)]
    if task == 'mem_r':
        return after[0] == '?' and a == dict(w.split('=') for w in after[1:])[words[1]]
    if task == 'trans_r':
        less = dict(f.split('<') for f in after[1:])         # a chain x < y < z
        x, y = words[1], words[2]
        return a == ('<' if less.get(less.get(x)) == y else '>' if less.get(less.get(y)) == x else '?')
    raise AssertionError(task)


def test_synthetic_answers_are_right():
    assert list(B.TASKS) == ['mem_s4', 'mem_l', 'add', 'state_l', 'sort_rel', 'cmp',      # Table 8
                             'ind_r', 'state_inv', 'perm_h1', 'mem_r', 'trans_r',         # future-dependent
                             'ind_r_far', 'state_inv_far', 'perm_h1_far', 'mem_r_far', 'trans_r_far']   # far
    assert B.CHANCE['mem_s4'] == 0.25 and set(B.CHANCE) == set(B.ALL_TASKS)
    for task in B.TASKS:
        ex = B.synthetic_examples(task, 400, seed=3)
        assert all(check_answer(task, *e) for e in ex), task
        assert all(set(''.join(e) + '\n') <= set(B.SYNTH_CHARS) for e in ex)
        assert ex == B.synthetic_examples(task, 400, seed=3) and ex[:50] == B.synthetic_examples(task, 50, seed=3)
        assert ex != B.synthetic_examples(task, 400, seed=4)
        answers = {}
        for p, a, _ in ex:
            answers.setdefault(p, set()).add(a)
        # future-dependent: one prompt, several answers (the left context cannot decide); else a function
        assert any(len(v) > 1 for v in answers.values()) == (task in B.FUTURE), task
    adds = B.synthetic_examples('add', 400, seed=3)
    assert max(len(a) for _, a, _ in adds) == 4  # two-digit sums with carries
    with pytest.raises(ValueError, match='mem_s4'):
        B.synthetic_examples('nope', 1, 0)


def test_far_tasks_put_their_evidence_beyond_the_ripple_reach():
    """A FON hole sees 16 positions either side through one centred ripple kernel of width 32 or its
    gamma addressing, and FON_REACH = 30 after it through the stack of two (test_fon.py measures
    it on the battery config's FON): the near tasks' evidence lies within 14 characters after the
    answer, the far tasks' starts more than FON_REACH (so more than 16) after the answer's end, over
    many seeds; and every example of every task fits the battery config's block_size (char tokens,
    the newline included)."""
    from configurator import parse_args
    block = parse_args([os.path.join(ROOT, 'config', 'fon', 'fon_cpu_battery.py')])['block_size']
    assert block == 96 and B.FON_REACH == 30
    longest = 0
    for seed in range(25):
        for task in B.TASKS:
            ex = B.synthetic_examples(task, 200, seed)
            longest = max(longest, max(len(''.join(e)) + 1 for e in ex))
            if task in B.NEAR:
                assert all(len(e[2]) <= 14 and B.evidence_gap(*e) == 1 for e in ex), task
            if task in B.FAR:
                gaps = [B.evidence_gap(*e) for e in ex]
                assert min(gaps) > B.FON_REACH > 16 and (min(gaps), max(gaps)) == (33, 49), (task, seed, min(gaps))
    assert longest <= block, longest      # mem_l, 91 characters at most
    assert set(B.FAR) <= set(B.FUTURE) and [t[:-4] for t in B.FAR] == list(B.NEAR)


def test_synthetic_dataset(tmp_path):
    d = P.prepare('synthetic', out_dir=str(tmp_path), seed=7, n_train=3200, n_val=640, quiet=True)
    assert d == str(tmp_path / 'synthetic')
    meta, bins = load(d)
    assert meta['tokenizer'] == 'char' and meta['itos'] == B.SYNTH_CHARS and meta['vocab_size'] == len(B.SYNTH_CHARS)
    assert meta['mask_id'] == meta['vocab_size'] and meta['mask_token'] == '_'
    assert meta['tasks'] == list(B.TASKS) and (meta['seed'], meta['n_train'], meta['n_val']) == (7, 3200, 640)
    encode, decode = P.get_tokenizer(meta)
    lines = {s: decode(b.tolist()).split('\n')[:-1] for s, b in bins.items()}
    assert len(lines['train']) == 3200 and len(lines['val']) == 640
    assert not set(lines['train']) & set(lines['val'])  # disjoint
    ex = B.synthetic_split(7, 3200, 640)
    for s in ('train', 'val'):
        tasks = [line.split()[0] for line in lines[s]]
        assert {t: tasks.count(t.replace('_', '')) for t in B.TASKS} == {t: len(lines[s]) // len(B.TASKS) for t in B.TASKS}
        assert [''.join(e[1:]) for e in ex[s]] == lines[s]  # eval.py can rebuild the exact examples
        assert all(check_answer(*e) for e in ex[s])
        # the answer spans, token by token: exactly the answers, in order (the task-given holes)
        mark = np.fromfile(f'{d}/{s}_answers.bin', dtype=np.uint8)
        assert len(mark) == len(bins[s]) and set(mark.tolist()) == {0, 1}
        starts = np.flatnonzero(np.diff(np.concatenate([[0], mark])) == 1)
        ends = np.flatnonzero(np.diff(np.concatenate([mark, [0]])) == -1) + 1
        assert [decode(bins[s][i:j].tolist()) for i, j in zip(starts, ends)] == [e[2] for e in ex[s]]
    # deterministic by seed
    d2 = P.prepare('synthetic', out_dir=str(tmp_path / 'again'), seed=7, n_train=3200, n_val=640, quiet=True)
    d3 = P.prepare('synthetic', out_dir=str(tmp_path / 'other'), seed=8, n_train=3200, n_val=640, quiet=True)
    for s in ('train', 'val'):
        assert open(f'{d}/{s}.bin', 'rb').read() == open(f'{d2}/{s}.bin', 'rb').read()
        assert open(f'{d}/{s}.bin', 'rb').read() != open(f'{d3}/{s}.bin', 'rb').read()
    # the MASK symbol round-trips through the char tokenizer
    assert encode('add 1+2 = _') == encode('add 1+2 = 3')[:-1] + [meta['mask_id']]
    assert decode(encode('add 1+2 = _')) == 'add 1+2 = _'


def test_synthetic_fill_mode_positions(tmp_path, small_bpe):
    char = P.get_tokenizer(json.load(open(os.path.join(
        P.prepare('synthetic', out_dir=str(tmp_path), n_train=66, n_val=11, quiet=True), 'meta.json'))))[0]
    ids, pos = B.encode_example('add 12+30 =', ' 42', char, mask_id=44)
    assert ids == char('add 12+30 =') + [44, 44, 44] + char('\n') and pos == [11, 12, 13]
    ids, pos = B.encode_example('indr', ' k3', char, mask_id=44, suffix=' = k3')     # the answer mid-line
    assert ids == char('indr') + [44, 44, 44] + char(' = k3\n') and pos == [4, 5, 6]
    # under GPT-2's pre-tokenizer the prompt's and the answer's tokens are a prefix for every task
    gpt2 = P.get_tokenizer({'tokenizer': 'gpt2', 'vocab_size': small_bpe.n_vocab})[0]
    for task in B.TASKS:
        for p, a, s in B.synthetic_examples(task, 30, seed=1):
            ids, pos = B.encode_example(p, a, gpt2, suffix=s)
            assert gpt2(p) == ids[:pos[0]] and small_bpe.decode(ids[pos[0]:pos[-1] + 1]) == a
            assert small_bpe.decode(ids[pos[-1] + 1:]) == s + '\n'
    d = P.prepare('synthetic', tokenizer='gpt2', out_dir=str(tmp_path), n_train=66, n_val=11, quiet=True)
    assert os.path.basename(d) == 'synthetic_gpt2'
    meta, bins = load(d)
    assert meta['vocab_size'] == small_bpe.n_vocab and meta['mask_id'] == small_bpe.n_vocab
    ex = B.synthetic_split(1337, 66, 11)['val']
    assert bins['val'].tolist() == sum((B.encode_example(p, a, gpt2, suffix=s)[0] for _, p, a, s in ex), [])


def test_names_and_missing_pyarrow(tmp_path, monkeypatch):
    assert P.dataset_dirname('synthetic') == 'synthetic'
    assert P.dataset_dirname('synthetic', 'gpt2') == 'synthetic_gpt2'
    assert P.dataset_dirname('wikitext103', 'byte') == 'wikitext103_byte'
    assert P.dataset_dirname('fineweb_edu', 'gpt2', 32768) == 'fineweb_edu_gpt2_32768'
    assert P.dataset_dirname('mine', 'gpt2') == 'mine'
    monkeypatch.setitem(sys.modules, 'pyarrow', None)
    monkeypatch.setitem(sys.modules, 'pyarrow.parquet', None)
    with pytest.raises(P.DataError, match='pip install pyarrow'):
        P.prepare('fineweb_edu', tokenizer='byte', out_dir=str(tmp_path))


def test_fineweb_parquet(tmp_path, small_bpe):
    pq = pytest.importorskip('pyarrow.parquet')  # the optional extra
    import pyarrow as pa
    for i, docs in enumerate([['first doc', 'second doc'], ['third'], ['held out']]):
        pq.write_table(pa.table({'text': docs}), str(tmp_path / f'shard_{i:05d}.parquet'))
    (tmp_path / 'out').mkdir()
    meta, bins = load(P.prepare('fineweb_edu', tokenizer='byte', input=str(tmp_path), out_dir=str(tmp_path / 'out'),
                                quiet=True))
    assert bins['train'].tolist() == [*b'first doc', 256, *b'second doc', 256, *b'third', 256]
    assert bins['val'].tolist() == [*b'held out', 256]
    meta, bins = load(P.prepare('fineweb_edu', input=str(tmp_path), out_dir=str(tmp_path / 'out'), quiet=True))
    eot = small_bpe.eot_token  # gpt2: <|endoftext|> after each document
    assert bins['train'].tolist() == [*small_bpe.encode('first doc'), eot, *small_bpe.encode('second doc'), eot,
                                      *small_bpe.encode('third'), eot]


def _snapshot(d):
    return {f: open(os.path.join(d, f), 'rb').read() for f in sorted(os.listdir(d))}


def test_a_failed_or_interrupted_prepare_keeps_the_previous_dataset(tmp_path, monkeypatch):
    good = tmp_path / 'good.txt'
    good.write_text(TEXT)
    d = P.prepare('mine', input=str(good), out_dir=str(tmp_path), quiet=True)
    before = _snapshot(d)
    small = tmp_path / 'small.txt'
    small.write_text('abcde')   # 5 bytes: too small to split
    with pytest.raises(P.DataError, match='too small to split'):
        P.prepare('mine', input=str(small), out_dir=str(tmp_path), quiet=True)
    assert _snapshot(d) == before
    monkeypatch.setattr(P, '_char_ids', lambda *a: _Stop())   # Ctrl-C part-way through the writing
    with pytest.raises(KeyboardInterrupt):
        P.prepare('mine', input=str(good), out_dir=str(tmp_path), quiet=True)
    assert _snapshot(d) == before
    assert sorted(os.listdir(tmp_path)) == ['good.txt', 'mine', 'small.txt']   # no half-made folder
    p = subprocess.run([sys.executable, '-c', 'import sys, prepare_data as P\ndef stop(*a): raise KeyboardInterrupt\n'
                        'P._char_ids = stop; P.main(sys.argv[1:])',
                        'mine', '--input', str(good), '--out_dir', str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 130 and 'Traceback' not in p.stderr and '.part' not in p.stderr, p.stderr
    assert _snapshot(d) == before


class _Stop:
    """An id array whose writing is interrupted."""
    def __len__(self):
        return 0

    def __getitem__(self, k):
        return self

    def __array__(self, *a, **k):
        raise KeyboardInterrupt


def test_a_folder_name_of_another_tokenizer_is_refused(tmp_path):
    (tmp_path / 'in.txt').write_text(TEXT)
    with pytest.raises(P.DataError, match='prepare_data.py shakespeare --tokenizer byte'):
        P.prepare('shakespeare_byte', input=str(tmp_path / 'in.txt'), out_dir=str(tmp_path), quiet=True)
    assert P.prepare_command('fineweb_edu_gpt2_32768') == 'python prepare_data.py fineweb_edu --tokenizer gpt2 --vocab 32768'
    assert P.prepare_command('mine') == 'python prepare_data.py mine --input FILE'


def test_a_dataset_name_must_be_a_plain_folder_name(tmp_path):
    (tmp_path / 'in.txt').write_text(TEXT)
    up = '/'.join(['..'] * 3 + ['etc'])    # a path out of data/
    for bad in ('', up, 'a/b', '.hidden', None):
        with pytest.raises(P.DataError, match='must be a plain folder name: letters, digits, _ . -'):
            P.check_name(bad)
    assert isinstance(P.DataError('x'), P.ConfigError)      # train.py reports it as one of its own mistakes
    for name in ('mine', 'shakespeare_char', 'fineweb_edu_gpt2_32768', 'v1.2-x'):
        P.check_name(name)
    assert_clean_error(cli(up, '--input', tmp_path / 'in.txt', '--out_dir', tmp_path / 'data'),
                       f"dataset name '{up}' must be a plain folder name")
    assert_clean_error(cli('', '--out_dir', tmp_path / 'data'), "dataset name '' must be a plain folder name")
    assert sorted(os.listdir(tmp_path)) == ['in.txt']     # nothing written anywhere


def test_a_recorded_dataset_starts_without_reading_its_ids(tmp_path, monkeypatch, capsys):
    # meta.json records each split's token count and largest id, so a run's start checks them instead of
    # reading a (200 GB) train.bin; a dataset without the record gets its ids read, a large one at a sample
    import data
    from conftest import train_script
    (tmp_path / 'in.txt').write_text(TEXT)
    d = P.prepare('mine', input=str(tmp_path / 'in.txt'), out_dir=str(tmp_path), quiet=True)
    meta, bins = load(d)
    cfg = {**train_script().DEFAULTS, 'data_dir': str(tmp_path), 'dataset': 'mine', 'block_size': 16}
    read = []
    real = data.largest_id
    monkeypatch.setattr(data, 'largest_id', lambda path, ids: read.append(os.path.basename(path)) or real(path, ids))
    data.load_data(dict(cfg))
    assert read == []
    refused = {   # meta.json's record edited: each start is refused in one line (a ConfigError: train.py's exit 2)
        'max_id': ({**meta, 'max_id': {**meta['max_id'], 'train': len(meta['itos'])}},
                   f"train.bin holds token id {len(meta['itos'])}, outside the vocabulary of {len(meta['itos'])}"),
        'tokens': ({**meta, 'val_tokens': meta['val_tokens'] - 1},
                   f"val.bin holds {meta['val_tokens']} tokens, but its meta.json records {meta['val_tokens'] - 1}"),
        'corrupt': ({**meta, 'max_id': {'train': 'x'}}, "meta.json has a max_id that is not {split: its largest token id}")}
    for edited, msg in refused.values():
        json.dump(edited, open(os.path.join(d, 'meta.json'), 'w'))
        with pytest.raises(P.ConfigError, match=re.escape(msg)) as e:
            data.load_data(dict(cfg))
        assert '\n' not in str(e.value) and read == []
    # prepared before the record (or nanoGPT's): a small stream's ids are all read, as they always were
    json.dump({k: v for k, v in meta.items() if k != 'max_id'}, open(os.path.join(d, 'meta.json'), 'w'))
    data.load_data(dict(cfg))
    assert sorted(read) == ['train.bin', 'val.bin'] and capsys.readouterr().out == ''
    # a large one at SAMPLES stretches of 1 MiB, with a note: here two, at either end of a 3 MiB stream
    monkeypatch.setattr(data, 'FULL_CHECK_BYTES', 2 ** 20)
    monkeypatch.setattr(data, 'SAMPLES', 2)
    big = np.zeros(3 * 2 ** 19, dtype=np.uint16)
    for at, seen in ((2 ** 19, False), (len(big) - 1, True)):   # in the unread middle MiB, in the last MiB
        big[at] = 999
        big.tofile(tmp_path / 'big.bin')
        if seen:
            with pytest.raises(P.ConfigError, match='big.bin holds token id 999, outside the vocabulary of 50'):
                data.check_tokens(str(tmp_path / 'big.bin'), 2, 50)
        else:
            data.check_tokens(str(tmp_path / 'big.bin'), 2, 50)
        note = capsys.readouterr().out.splitlines()
        assert len(note) == 1 and 'big.bin has no recorded max_id' in note[0] and 'checked in 2 MiB of its 3 MiB' in note[0]
