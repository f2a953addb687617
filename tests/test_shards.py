"""Shards checked whole before any trial, and shard making that leaves nothing behind."""
import fcntl
import io
import json
import os
import re
import signal
import tarfile
from pathlib import Path

import pytest

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, plan_trials
from sweeper.schema import root_config_from_dict
from workloads import shard_check
from workloads.shard_check import ShardDamaged, cached_count, checked_samples, count_samples
from workloads.shards import (_ensure_set, _write_shard, check_local_shards, ensure_synthetic_shards,
                              remove_stale_staging, shard_set_name)
from workloads.specs import _shard_problem

LAPTOP = ClusterShape(node_cpus=[2.0], node_gpus=[0.0])
SAMPLES, SEQ = 8, 15                       # 64-byte samples: one 512-byte block each


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "shard-00000.tar"
    _write_shard(path, 0, SAMPLES, SEQ, 100, 0)
    return path


def _cut(path, size):
    path.write_bytes(path.read_bytes()[:size])


def _stream_count(path):
    """What a streaming reader (tarfile "r|", as webdataset reads) gets, without a word."""
    with tarfile.open(path, "r|") as tar:
        return sum(1 for m in tar if m.isfile())


def test_a_whole_shard_counts_its_samples(shard):
    assert count_samples(str(shard)) == SAMPLES


def test_a_tar_cut_inside_a_header_is_named_with_its_offset(shard):
    _cut(shard, 3 * 1024 + 200)            # 3 members of 1024 bytes each, then 200 bytes of the 4th header
    assert _stream_count(shard) == 3       # a stream reader stops there silently: why the walk exists
    with pytest.raises(ShardDamaged, match=rf"^{shard}: is cut inside a header \(200 of 512 bytes\) at byte 3072"):
        count_samples(str(shard))


def test_a_garbled_header_is_named_with_its_offset(shard):
    data = bytearray(shard.read_bytes())
    data[2 * 1024 + 130: 2 * 1024 + 140] = b"x" * 10      # the third member's size field
    shard.write_bytes(bytes(data))
    assert _stream_count(shard) == 2
    with pytest.raises(ShardDamaged, match=rf"^{shard}: garbled tar header at byte 2048 \(bad checksum\)"):
        count_samples(str(shard))


@pytest.mark.parametrize("size, message", [
    (3 * 1024 + 512 + 10, r"member '00000000003\.tokens\.i32' at byte 3072 needs 64 bytes of data but the file ends"),
    (SAMPLES * 1024, rf"ends at byte {SAMPLES * 1024} of {SAMPLES * 1024}, before the tar's end marker"),
])
def test_a_tar_cut_in_data_or_before_its_end_marker(shard, size, message):
    _cut(shard, size)
    with pytest.raises(ShardDamaged, match=message):
        count_samples(str(shard))


def test_long_names_and_pax_headers_count_by_their_real_names(tmp_path):
    path = tmp_path / "long.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i, ext in [(0, "txt"), (0, "cls"), (1, "txt")]:
            info = tarfile.TarInfo(f"{'d' * 120}/sample{i}.{ext}")
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
    assert count_samples(str(path)) == 2
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"{'p' * 150}/s{i}.bin")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"z"))
    assert count_samples(str(path)) == 3


def test_the_count_is_cached_by_path_size_and_mtime(shard, tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    assert checked_samples(str(shard), cache) == SAMPLES
    files = list((tmp_path / "cache" / "checked").iterdir())
    assert len(files) == 1 and json.loads(files[0].read_text())["samples"] == SAMPLES   # no staging file left

    def no_walk(path):
        raise AssertionError("walked again although the file did not change")
    monkeypatch.setattr(shard_check, "count_samples", no_walk)
    assert checked_samples(str(shard), cache) == SAMPLES
    _write_shard(shard, 0, SAMPLES // 2, SEQ, 100, 0)         # another file at the same path
    assert cached_count(str(shard), cache) is None
    monkeypatch.undo()
    assert checked_samples(str(shard), cache) == SAMPLES // 2


def test_a_damaged_shard_is_never_cached(shard, tmp_path):
    cache = str(tmp_path / "cache")
    _cut(shard, 1024 + 100)
    with pytest.raises(ShardDamaged):
        checked_samples(str(shard), cache)
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_costs_only_the_next_walk(shard, tmp_path):
    (tmp_path / "file").write_text("x")
    assert checked_samples(str(shard), str(tmp_path / "file")) == SAMPLES


@pytest.mark.parametrize("make, message", [
    (lambda d: d.mkdir(), r"is a folder, not a tar shard; give the shards' pattern"),
    (lambda d: tarfile.open(d, "w").close(), r": holds no samples \(an empty tar\); replace the shard"),
    (lambda d: d.write_bytes(b"not a tar" * 100), r"1 shard\(s\) are not tar files"),
])
def test_local_shard_problems_are_one_line(tmp_path, make, message):
    target = tmp_path / "train-0.tar"
    make(target)
    problem = check_local_shards(str(target), str(tmp_path / "cache"))
    assert "\n" not in problem
    assert re.search(message, problem), problem


def _loader_root(**data):
    return root_config_from_dict({"workload": {"target": "workloads.dataloader:run",
                                               "spec": "workloads.specs:DATALOADER"}, "data": data})


def test_the_plan_refuses_a_damaged_user_shard_naming_key_file_and_offset(tmp_path):
    for i in range(2):
        _write_shard(tmp_path / f"train-{i}.tar", i, SAMPLES, SEQ, 100, 0)
    _cut(tmp_path / "train-1.tar", 1024 + 100)
    url = str(tmp_path / "train-{0..1}.tar")
    _shard_problem.cache_clear()
    with pytest.raises(ConfigError) as err:
        plan_trials([([], _loader_root(url=url, cache_dir=str(tmp_path / "cache")))], LAPTOP)
    assert str(err.value).startswith(f"data.url={url!r}: {tmp_path / 'train-1.tar'}: is cut inside a header "
                                     f"(100 of 512 bytes) at byte 1024")


def test_the_plan_refuses_a_damaged_synthetic_set_an_earlier_run_made(tmp_path):
    cache = str(tmp_path / "cache")
    paths = ensure_synthetic_shards(cache, 2, SAMPLES, SEQ, 100, 0)
    root = _loader_root(cache_dir=cache, num_shards=2, samples_per_shard=SAMPLES, seq_len=SEQ, vocab_size=100,
                        batch_size=4)
    assert len(plan_trials([([], root)], LAPTOP)) == 1
    _cut(tmp_path / paths[0], 2 * 1024 + 7)
    with pytest.raises(ConfigError, match=rf"^{paths[0]}: is cut inside a header .* at byte 2048.*; remove .* and "
                                          rf"the next run makes it again"):
        plan_trials([([], root)], LAPTOP)


# -- shard making leaves nothing behind -------------------------------------------------
def _leftovers(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir())


@pytest.mark.parametrize("stop", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_staging_goes_when_making_stops(tmp_path, stop):
    def write(path, shard):
        if shard == 1:
            raise stop
        _write_shard(path, shard, SAMPLES, SEQ, 100, 0)
    with pytest.raises(type(stop)):
        _ensure_set(str(tmp_path), "tokens-0123456789", 3, write)
    assert _leftovers(tmp_path) == []


def test_sigterm_while_making_raises_and_leaves_no_staging(tmp_path):
    def write(path, shard):
        _write_shard(path, shard, SAMPLES, SEQ, 100, 0)
        os.kill(os.getpid(), signal.SIGTERM)        # as a cancelled trial gets it
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt):
        _ensure_set(str(tmp_path), "tokens-0123456789", 3, write)
    assert _leftovers(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL     # put back


def test_stale_staging_of_dead_makers_is_removed_and_a_live_makers_kept(tmp_path):
    name = shard_set_name(2, SAMPLES, SEQ, 100, 0)                # the set this maker makes: its lock is held
    other, busy = "images-aaaaaaaaaa", "tokens-bbbbbbbbbb"
    for set_name in (name, other, busy):
        (tmp_path / f".{set_name}.lock").write_text("")
    stale = [f".{name}.staging-4194000-k2j3h4l5", f".{name}-ab12cd34", f".{other}.staging-4194001-zz9yy8xx"]
    alive = f".{busy}.staging-{os.getpid()}-q1w2e3r4"
    for folder in stale + [alive]:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "shard-00000.tar").write_bytes(b"x" * 1000)
    (tmp_path / "tokens-cccccccccc").mkdir()                     # a finished set is never touched
    with open(tmp_path / f".{busy}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                           # its maker is still writing
        paths = ensure_synthetic_shards(str(tmp_path), 2, SAMPLES, SEQ, 100, 0)
        assert _leftovers(tmp_path) == sorted([alive, name, "tokens-cccccccccc"])
        assert Path(paths[0]).parent.name == name
    assert remove_stale_staging(tmp_path) == [tmp_path / alive]   # once its maker is gone


@pytest.mark.slow
def test_ctrl_c_while_the_driver_makes_shards_leaves_no_staging(tmp_path):
    import subprocess
    import sys
    import time

    cache = tmp_path / "cache"
    env = {**os.environ, "SWEEPER_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'res'}", "executor=local",
                             "repeats=1", "wandb.enabled=false", "history.enabled=false", "data.num_shards=64",
                             "data.samples_per_shard=512", "data.seq_len=2048"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (cache.is_dir() and any(".staging-" in p.name for p in cache.iterdir())):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert [p.name for p in cache.iterdir() if p.is_dir()] == []


@pytest.mark.parametrize("fmt, name", [
    (tarfile.USTAR_FORMAT, "a/" * 60 + "sample.cls"),      # ustar's prefix field
    (tarfile.GNU_FORMAT, "d" * 120 + "/s.txt"),             # a GNU long-name member first
    (tarfile.PAX_FORMAT, "p" * 150 + "/s.bin"),             # a pax header first
    (tarfile.GNU_FORMAT, "plain.txt"),
])
def test_the_fast_header_parser_reads_what_tarfile_reads(tmp_path, fmt, name):
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w", format=fmt) as tar:
        info = tarfile.TarInfo(name)
        info.size = 700
        tar.addfile(info, io.BytesIO(b"y" * 700))
    data, offset, parsed = path.read_bytes(), 0, 0
    while data[offset:offset + 512].count(0) < 512:
        block = data[offset:offset + 512]
        fast, slow = shard_check._plain_header(block), shard_check._any_header(block, str(path), offset)
        assert fast is None or fast == slow
        parsed += fast is not None
        offset += 512 + (slow.size + 511) // 512 * 512
    assert parsed >= 1 and count_samples(str(path)) == 1


def test_shards_smaller_than_one_batch_are_refused_before_any_trial(tmp_path):
    for i in range(2):
        _write_shard(tmp_path / f"train-{i}.tar", i, SAMPLES, SEQ, 100, 0)
    url = str(tmp_path / "train-{0..1}.tar")
    cache = str(tmp_path / "cache")
    assert len(plan_trials([([], _loader_root(url=url, cache_dir=cache, batch_size=2 * SAMPLES))], LAPTOP)) == 1
    with pytest.raises(ConfigError, match=r"^data\.url=.*: the 2 shard\(s\) hold 16 sample\(s\), fewer than one batch "
                                          r"\(data\.batch_size=17\)"):
        plan_trials([([], _loader_root(url=url, cache_dir=cache, batch_size=2 * SAMPLES + 1))], LAPTOP)
    with pytest.raises(ConfigError, match=r"^data\.batch_size: 64 is more than the synthetic shards hold .* = 32\)"):
        plan_trials([([], _loader_root(cache_dir=cache, num_shards=2, samples_per_shard=16, batch_size=64))], LAPTOP)


def test_planning_removes_a_killed_makers_staging(tmp_path):
    name = shard_set_name(2, SAMPLES, SEQ, 100, 0)
    (tmp_path / f".{name}.lock").write_text("")
    (tmp_path / f".{name}.staging-4194000-k2j3h4l5").mkdir()        # its trial got SIGKILL while making
    root = _loader_root(cache_dir=str(tmp_path), num_shards=2, samples_per_shard=SAMPLES, seq_len=SEQ, vocab_size=100,
                        batch_size=4)
    plan_trials([([], root)], LAPTOP)
    assert _leftovers(tmp_path) == []
