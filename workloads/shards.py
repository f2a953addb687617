"""Synthetic webdataset tar shards of token sequences, made once and reused.

Shards are deterministic in (num_shards, samples_per_shard, seq_len, vocab_size,
seed), so their folder name is a hash of those; concurrent trials take a file
lock, and the shards are written into a staging folder (.<set>.staging-<pid>-*)
that is renamed into place, so no reader ever sees half a shard set. The staging
folder is removed on every way out (an error, Ctrl-C, SIGTERM); one that a killed
maker left is removed by the next maker, once no process holds its set's lock.
Before any trial, shards are checked whole (workloads/shard_check.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import io
import os
import re
import shutil
import signal
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

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
    """Shards written once into a staging folder renamed into place, under a lock. The staging
    folder goes on every way out (an error, Ctrl-C, SIGTERM); one a killed maker left behind
    is removed by the next maker (remove_stale_staging)."""
    root = Path(os.path.expanduser(cache_dir))
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    if not final.is_dir():
        with open(root / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)       # another trial may be writing the same set
            if not final.is_dir():
                remove_stale_staging(root, held=name)
                _make_set(root, name, num_shards, write)
    return shard_urls(final, num_shards)


def _make_set(root: Path, name: str, num_shards: int, write: Callable[[Path, int], None]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{name}{STAGING}{os.getpid()}-", dir=root))
    try:
        with _sigterm_raises():
            for shard in range(num_shards):
                write(staging / f"shard-{shard:05d}.tar", shard)
            os.replace(staging, root / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)     # gone already once renamed into place


STAGING = ".staging-"
# .<set>.staging-<pid>-<random>, and .<set>-<random> as makers before it named theirs
_STAGING_NAMES = (re.compile(r"^\.(?P<set>[^.]+)\.staging-\d+-[a-z0-9_]+$"), re.compile(r"^\.(?P<set>[^.]+)-[a-z0-9_]{8}$"))


def _staging_folders(root: Path) -> Dict[str, List[Path]]:
    """Staging folders in the cache by the set they were making (only sets with a lock file)."""
    found: Dict[str, List[Path]] = {}
    for entry in root.iterdir():
        match = next((m for m in (p.match(entry.name) for p in _STAGING_NAMES) if m), None)
        if match and entry.is_dir() and (root / f".{match['set']}.lock").exists():
            found.setdefault(match["set"], []).append(entry)
    return found


def remove_stale_staging(root: Path, held: str = "") -> List[Path]:
    """Removes the staging folders no live maker is writing: those of the set whose lock this
    process holds (`held`), and those of any set whose lock nobody holds (its maker died: a
    killed trial cannot clean up). Returns what it removed."""
    removed: List[Path] = []
    for set_name, folders in _staging_folders(root).items():
        if set_name == held:
            removed += _remove(folders)
            continue
        with open(root / f".{set_name}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:        # its maker is alive and writing
                continue
            removed += _remove(folders)
    return removed


def _remove(folders: List[Path]) -> List[Path]:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return folders


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while shards are made, so the staging folder goes;
    left alone where someone else handles it (the driver, with the local executor) or where
    handlers cannot be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


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

        from sweeper.files import write_with

        def create(staging: Path) -> None:
            with IndexCreator(os.path.abspath(shard), str(staging), verbose=False) as creator:
                creator.create_index()
        index.parent.mkdir(parents=True, exist_ok=True)
        with _sigterm_raises():
            write_with(index, create)       # atomic: a concurrent trial reads a whole index or none
    return str(index)


MAX_SHARDS = 1_000_000     # a pattern naming more is a mistyped range ({0000..9999999}), not a dataset


def expand_url(url: str) -> List[str]:
    """Local shard paths named by a brace pattern such as /data/train-{0000..0099}.tar."""
    import itertools

    import braceexpand   # a webdataset dependency

    paths = [os.path.expanduser(p) for p in itertools.islice(braceexpand.braceexpand(url), MAX_SHARDS + 1)]
    if len(paths) > MAX_SHARDS:
        from sweeper.errors import ConfigError

        raise ConfigError(f"data.url={url!r}: names more than {MAX_SHARDS} shards; check the {{0000..0099}} range")
    if len(paths) == 1 and any(c in paths[0] for c in "*?["):
        paths = sorted(glob.glob(paths[0]))
    return paths


def check_local_shards(url: str, cache_dir: str, batch_size: int = 1) -> str:
    """'' when every shard the pattern names is a readable tar file holding samples, walked
    whole (workloads/shard_check.py; counts cached under cache_dir); else what is wrong, naming
    the file (and the byte offset), in words a user can act on."""
    paths = expand_url(url)
    missing = [p for p in paths if not os.path.exists(p)]
    if not paths:
        return "the pattern matches no file; check the path and the * or ? in it"
    if missing:
        return (f"{len(missing)} of {len(paths)} shard(s) do not exist (first: {missing[0]}); "
                f"check the path and the {{0000..0099}} range")
    folders = [p for p in paths if os.path.isdir(p)]
    if folders:
        return (f"{folders[0]} is a folder, not a tar shard; give the shards' pattern, "
                f"e.g. {os.path.join(folders[0], 'train-{0000..0099}.tar')}")
    unreadable = [p for p in paths if not os.access(p, os.R_OK)]
    if unreadable:
        return f"{len(unreadable)} shard(s) cannot be read (first: {unreadable[0]}); check permissions"
    corrupt = [p for p in paths if not tarfile.is_tarfile(p)]
    if corrupt:
        return (f"{len(corrupt)} shard(s) are not tar files (first: {corrupt[0]}); "
                "replace them, or leave them out of the pattern")
    return whole_shards_problem(paths, cache_dir, "replace the shard, or leave it out of the pattern", batch_size)


def whole_shards_problem(paths: List[str], cache_dir: str, advice: str, batch_size: int = 1) -> str:
    """'' when each shard reads to its end and holds a sample, and together they hold a batch;
    else the first problem and `advice`."""
    from workloads.shard_check import ShardDamaged, checked_samples

    total = 0
    for path in paths:
        try:
            samples = checked_samples(path, cache_dir)
        except ShardDamaged as exc:
            return f"{exc}; {advice}"
        if not samples:
            return f"{path}: holds no samples (an empty tar); {advice}"
        total += samples
    if total < batch_size:
        return (f"the {len(paths)} shard(s) hold {total} sample(s), fewer than one batch (data.batch_size="
                f"{batch_size}); lower data.batch_size or give more shards")
    return ""


def made_synthetic_set(data) -> Optional[Path]:
    """The folder of the synthetic shard set these data settings name, when it was made already."""
    if data.kind == "images":
        im = data.images
        name = image_set_name(data.num_shards, data.samples_per_shard, im.height, im.width, im.quality, data.seed)
    else:
        name = shard_set_name(data.num_shards, data.samples_per_shard, data.seq_len, data.vocab_size, data.seed)
    folder = Path(os.path.expanduser(data.cache_dir)) / name
    return folder if folder.is_dir() else None


def check_synthetic_shards(data) -> str:
    """A synthetic set made by an earlier run, walked whole like a user's shards (a copy can be
    damaged after it was made); '' when it is fine or not made yet. Staging folders that dead
    makers left in the cache go first (a trial killed while making shards cannot clean up)."""
    root = Path(os.path.expanduser(data.cache_dir))
    if root.is_dir():
        remove_stale_staging(root)          # a killed trial's half-made set: nobody else cleans it
    folder = made_synthetic_set(data)
    if folder is None:
        return ""
    return whole_shards_problem(shard_urls(folder, data.num_shards), data.cache_dir,
                                f"remove {folder} and the next run makes it again")
