"""
download(url, path): stream a file with a tqdm bar, resume a leftover .part with an HTTP Range
request, check its size and sha256 (given, or the one the HuggingFace Hub publishes), and only
then give it its name. prepare_data.py fetches its sources with it.
"""
import hashlib
import os
import re

import requests
from tqdm import tqdm


class DataError(Exception):
    """An expected failure (network, bad input, missing extra): one clear line, no traceback."""


def error_line(e):
    """One short line for an exception (requests' messages nest a whole traceback's worth)."""
    msg = str(e).splitlines()[0] if str(e) else ''
    m = re.search(r"(Failed to resolve '[^']+'|Connection refused|timed out|Name or service not known)", msg)
    return f'{type(e).__name__}: {m.group(1) if m else msg[:200]}'


def _published_sha256(r):
    # the HuggingFace Hub sends the sha256 of LFS files as X-Linked-Etag on the redirect
    for resp in [*r.history, r]:
        tag = resp.headers.get('X-Linked-Etag', '').strip('"')
        if re.fullmatch(r'[0-9a-f]{64}', tag):
            return tag
    return None


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def download(url, path, sha256=None, size=None, name='NAME', quiet=False):
    """Stream url to path (a tqdm bar on stderr), resuming a leftover path + '.part' with a
    Range request; check the size and the sha256 (given, or published by the server)."""
    if os.path.exists(path):
        return path  # it was checked before it got its final name
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    part = path + '.part'
    have = os.path.getsize(part) if os.path.exists(part) else 0
    offline = f'Without network, prepare from a local copy: python prepare_data.py {name} --input FILE'
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
                    raise DataError(f'{url} resumed at the wrong offset; the partial file was deleted, '
                                    f'run again')
                sha256 = sha256 or _published_sha256(r)
                length = r.headers.get('Content-Length')
                total = have + int(length) if length and length.isdigit() else size
                with open(part, 'ab' if have else 'wb') as f, \
                        tqdm(total=total, initial=have, unit='B', unit_scale=True, unit_divisor=1024,
                             desc=os.path.basename(path), disable=quiet) as bar:
                    for block in r.iter_content(1 << 20):
                        f.write(block)
                        bar.update(len(block))
                if total and os.path.getsize(part) < total:
                    raise DataError(f'download of {url} stopped at {os.path.getsize(part)} of {total} bytes; '
                                    f'run the same command again to resume. {offline}')
    except requests.RequestException as e:
        raise DataError(f'download of {url} failed ({error_line(e)}). {offline} '
                        f'(rerunning resumes a partial download)') from None
    got = os.path.getsize(part)
    if size is not None and got != size:
        os.remove(part)
        raise DataError(f'{url} gave {got} bytes, expected {size}; the file was deleted, run again '
                        f'to download it afresh. {offline}')
    if sha256 is not None:
        digest = _sha256_file(part)
        if digest != sha256:
            os.remove(part)
            raise DataError(f'sha256 mismatch for {url}: expected {sha256}, got {digest}; the file was '
                            f'deleted, run again to download it afresh. {offline}')
    os.replace(part, path)
    return path
