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
from typing import Callable, List

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
    name = shard_set_name(num_shards, samples_per_shard, seq_len, vocab_size, seed)
    write = lambda path, shard: _write_shard(path, shard, samples_per_shard, seq_len, vocab_size, seed)  # noqa: E731
    return _ensure_set(cache_dir, name, num_shards, write)


def _ensure_set(cache_dir: str, name: str, num_shards: int, write: Callable[[Path, int], None]) -> List[str]:
    """Shards written once into a staging folder renamed into place, under a lock."""
    root = Path(os.path.expanduser(cache_dir))
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    if not final.is_dir():
        with open(root / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)       # another trial may be writing the same set
            if not final.is_dir():
                staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
                for shard in range(num_shards):
                    write(staging / f"shard-{shard:05d}.tar", shard)
                os.replace(staging, final)
    return shard_urls(final, num_shards)


# -- JPEG shards (data.kind=images) --------------------------------------------------
IMAGE_EXT = "jpg"


def image_set_name(num_shards: int, samples_per_shard: int, height: int, width: int, quality: int, seed: int) -> str:
    import PIL

    spec = f"v1-{num_shards}-{samples_per_shard}-{height}-{width}-{quality}-{seed}-pil{PIL.__version__}"
    return f"images-{hashlib.sha1(spec.encode()).hexdigest()[:10]}"


def synthetic_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A photo-like HxWx3 uint8 image: smooth colour fields plus grain. Pure noise would
    make JPEGs several times larger and slower to decode than real photos."""
    from PIL import Image

    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    smooth = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.int16)
    grain = rng.integers(-12, 13, size=(height, width, 3), dtype=np.int16)
    return np.clip(smooth + grain, 0, 255).astype(np.uint8)


def _write_image_shard(path: Path, shard: int, samples: int, height: int, width: int, quality: int, seed: int) -> None:
    from PIL import Image

    rng = np.random.default_rng([seed, shard])
    with tarfile.open(path, "w") as tar:
        for i in range(samples):
            buffer = io.BytesIO()
            Image.fromarray(synthetic_image(rng, height, width)).save(buffer, format="JPEG", quality=quality)
            info = tarfile.TarInfo(f"{shard:05d}{i:06d}.{IMAGE_EXT}")
            info.size, info.mtime = buffer.tell(), 0
            buffer.seek(0)
            tar.addfile(info, buffer)


def ensure_image_shards(cache_dir: str, num_shards: int, samples_per_shard: int, height: int, width: int,
                        quality: int, seed: int) -> List[str]:
    """JPEG shard paths, made first if this is the first trial to ask (deterministic, like the token shards)."""
    name = image_set_name(num_shards, samples_per_shard, height, width, quality, seed)
    write = lambda path, shard: _write_image_shard(path, shard, samples_per_shard, height, width, quality, seed)  # noqa: E731
    return _ensure_set(cache_dir, name, num_shards, write)


# -- DALI's index files ----------------------------------------------------------------
def ensure_dali_indexes(paths: List[str], cache_dir: str) -> List[str]:
    """One DALI index per shard (sample offsets in the tar), written once and reused, so DALI's
    webdataset reader need not scan every tar at start. Beside the shard when its folder is
    writable, else in the cache folder under a name from the shard's path, size and edges."""
    return [_ensure_index(path, cache_dir) for path in paths]


def _index_path(shard: str, cache_dir: str) -> Path:
    beside = Path(shard).with_suffix(".idx")
    if os.access(beside.parent, os.W_OK):
        return beside
    size = os.path.getsize(shard)
    with open(shard, "rb") as f:            # content, not file times, names the index
        head = f.read(65536)
        f.seek(max(0, size - 65536))
        tail = f.read()
    digest = hashlib.sha1(f"{os.path.abspath(shard)}|{size}".encode() + head + tail).hexdigest()[:16]
    return Path(os.path.expanduser(cache_dir)) / "dali-index" / f"{digest}.idx"


def _ensure_index(shard: str, cache_dir: str) -> str:
    index = _index_path(shard, cache_dir)
    if not index.exists():
        from wds2idx import IndexCreator    # shipped in DALI's wheel (python -m wds2idx)

        index.parent.mkdir(parents=True, exist_ok=True)
        staging = index.with_name(f".{index.name}.{os.getpid()}")
        with IndexCreator(os.path.abspath(shard), str(staging), verbose=False) as creator:
            creator.create_index()
        os.replace(staging, index)          # atomic: a concurrent trial reads a whole index or none
    return str(index)


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
