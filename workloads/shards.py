"""Synthetic webdataset tar shards of token sequences, made once and reused.

Shards are deterministic in (num_shards, samples_per_shard, seq_len, vocab_size,
seed), so their folder name is a hash of those; concurrent trials take a file
lock, and the shards are written into a temporary folder that is renamed into
place, so no reader ever sees half a shard set.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import List

import numpy as np

TOKEN_DTYPE = np.int32
SAMPLE_EXT = "tokens.i32"   # raw little-endian int32, seq_len + 1 tokens


def shard_set_name(num_shards: int, samples_per_shard: int, seq_len: int, vocab_size: int, seed: int) -> str:
    spec = f"v1-{num_shards}-{samples_per_shard}-{seq_len}-{vocab_size}-{seed}"
    return f"tokens-{hashlib.sha1(spec.encode()).hexdigest()[:10]}"


def shard_urls(folder: Path, num_shards: int) -> List[str]:
    return [str(folder / f"shard-{i:05d}.tar") for i in range(num_shards)]


def _write_shard(path: Path, shard: int, samples: int, seq_len: int, vocab: int, seed: int) -> None:
    rng = np.random.default_rng([seed, shard])
    tokens = rng.integers(0, vocab, size=(samples, seq_len + 1), dtype=TOKEN_DTYPE)
    with tarfile.open(path, "w") as tar:
        for i in range(samples):
            payload = tokens[i].astype("<i4").tobytes()
            info = tarfile.TarInfo(f"{shard:05d}{i:06d}.{SAMPLE_EXT}")
            info.size, info.mtime = len(payload), 0   # fixed mtime: identical bytes every time
            tar.addfile(info, io.BytesIO(payload))


def ensure_synthetic_shards(cache_dir: str, num_shards: int, samples_per_shard: int,
                            seq_len: int, vocab_size: int, seed: int) -> List[str]:
    """Shard paths, making them first if this is the first trial to ask."""
    root = Path(os.path.expanduser(cache_dir))
    root.mkdir(parents=True, exist_ok=True)
    name = shard_set_name(num_shards, samples_per_shard, seq_len, vocab_size, seed)
    final = root / name
    if not final.is_dir():
        with open(root / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)       # another trial may be writing the same set
            if not final.is_dir():
                staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
                for shard in range(num_shards):
                    _write_shard(staging / f"shard-{shard:05d}.tar", shard, samples_per_shard,
                                 seq_len, vocab_size, seed)
                os.replace(staging, final)
    return shard_urls(final, num_shards)


def expand_url(url: str) -> List[str]:
    """Local shard paths named by a brace pattern such as /data/train-{0000..0099}.tar."""
    import braceexpand   # a webdataset dependency

    paths = [os.path.expanduser(p) for p in braceexpand.braceexpand(url)]
    if len(paths) == 1 and any(c in paths[0] for c in "*?["):
        paths = sorted(glob.glob(paths[0]))
    return paths


def check_local_shards(url: str) -> str:
    """'' when every shard the pattern names exists, is readable and starts like a tar file;
    else what is wrong, in words a user can act on."""
    paths = expand_url(url)
    missing = [p for p in paths if not os.path.exists(p)]
    if not paths or missing:
        return (f"{len(missing) or 'all'} of {len(paths)} shard(s) do not exist (first: {(missing or [url])[0]}); "
                f"check the path and the {{0000..0099}} range")
    unreadable = [p for p in paths if not os.access(p, os.R_OK)]
    if unreadable:
        return f"{len(unreadable)} shard(s) cannot be read (first: {unreadable[0]}); check permissions"
    corrupt = [p for p in paths if not tarfile.is_tarfile(p)]
    if corrupt:
        return f"{len(corrupt)} shard(s) are not tar files (first: {corrupt[0]})"
    return ""
