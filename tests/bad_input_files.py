"""Damaged and hostile files for the bad-input suite (tests/bad_input_cases.py): broken tars,
unreadable parquet and JSON, user workload modules that fail at import, a folder to protect."""
from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path
from typing import List

SECRETS = ("PASSW0RD", "SECRET-tok-7731", "PASSbob99")


def members(tar_path: Path) -> List[tarfile.TarInfo]:
    with tarfile.open(tar_path) as tar:
        return tar.getmembers()


def cut(src: Path, dst: Path, size: int) -> Path:
    dst.write_bytes(src.read_bytes()[:size])
    return dst


def cut_in_header(src: Path, dst: Path) -> Path:
    """Ends 100 bytes into the second member's header: a streaming read stops there silently."""
    return cut(src, dst, members(src)[1].offset + 100)


def cut_in_data(src: Path, dst: Path) -> Path:
    first = members(src)[0]
    return cut(src, dst, first.offset_data + first.size // 2)


def garbled_header(src: Path, dst: Path) -> Path:
    """The second member's header overwritten with noise (its checksum no longer matches)."""
    data = bytearray(src.read_bytes())
    start = members(src)[1].offset
    data[start:start + 512] = bytes((i * 37 + 11) % 251 for i in range(512))
    dst.write_bytes(bytes(data))
    return dst


def empty_tar(dst: Path) -> Path:
    with tarfile.open(dst, "w"):
        pass
    return dst


def tar_of(dst: Path, names: List[str]) -> Path:
    with tarfile.open(dst, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"abcd"))
    return dst


def damaged_parquet(path: Path) -> Path:
    """A parquet file cut in half: its footer (and the magic bytes) gone."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def truncated_json(path: Path) -> Path:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    return path


def null_partition(real: Path, dst: Path) -> Path:
    """A history partition whose every column is typed null, as a run interrupted before any
    trial succeeded was once appended."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(real)
    nulls = pa.table({name: pa.nulls(table.num_rows) for name in table.column_names})
    dst.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(nulls, dst)
    return dst


def module(folder: Path, name: str, source: str) -> str:
    (folder / f"{name}.py").write_text(source)
    return name


RAISES_AT_IMPORT = "raise RuntimeError('cannot reach the feature store')\n"
SYNTAX_ERROR = "def run(cfg, probe):\n    return (\n"
NOT_CALLABLE = "run = 3\n"
DAEMON = '''import os, signal, time


def run(cfg, probe):
    """Starts a classic double-forked daemon that ignores SIGTERM, then returns."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(cfg.workload.params["pid_file"], "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    for _ in range(cfg.workload.steps):
        with probe.step(items=1):
            time.sleep(0.01)
    time.sleep(0.5)
    return {}
'''


def victim(folder: Path) -> Path:
    """A folder with a `trials/` subfolder that a hostile resume= must leave alone."""
    keep = folder / "trials" / ".keep"
    keep.mkdir(parents=True)
    (keep / "f").write_text("x\n")
    (folder / "notes.txt").write_text("mine\n")
    return folder


def copy_run(run: Path, results: Path, run_id: str = None) -> Path:
    dst = results / run.parent.name / (run_id or run.name)
    shutil.copytree(run, dst)
    return dst
