"""No credential reaches a file or the terminal, wherever it was typed: the environment, a URL's
userinfo, a param named like a secret, a tracking URI; with W&B (offline) and MLflow on. (W&B online with its server unreachable is a case of
tests/bad_input_cases.py.)"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from sweeper import redact as redact_module
from sweeper.redact import redact, redact_file, redact_text, remember, secrets
from tests.conftest import ROOT

ENV_SECRETS = {"WANDB_API_KEY": "wandbkey" + "0" * 32, "AWS_SECRET_ACCESS_KEY": "awsSecretAccess9876543210",
               "HF_TOKEN": "hf_TokenValue1234567"}
URL_PASSWORD = "PASSW0RD-url-4711"
PARAM_SECRET = "SECRET-param-0815"
URI_PASSWORD = "PASS-mlflow-2342"
SECRETS = [*ENV_SECRETS.values(), URL_PASSWORD, PARAM_SECRET, URI_PASSWORD]
SAMPLES = 4


@pytest.fixture
def remembered(monkeypatch):
    monkeypatch.setattr(redact_module, "_remembered", {})


@pytest.mark.parametrize("text, expected", [
    ("pipe:curl -s https://user:PASSW0RD@host/x.tar", "pipe:curl -s https://***@host/x.tar"),
    ("mlflow.tracking_uri=http://bob:PASS@127.0.0.1:9", "mlflow.tracking_uri=http://***@127.0.0.1:9"),
    ("git+ssh://git@github.com/o/r", "git+ssh://***@github.com/o/r"),
    ("+workload.params.api_token=SECRET data.batch_size=8", "+workload.params.api_token=[redacted] data.batch_size=8"),
    ("HF_TOKEN=abc,password=x;passwd=y aws_secret_access_key=z", "HF_TOKEN=[redacted],password=[redacted];"
     "passwd=[redacted] aws_secret_access_key=[redacted]"),
    ("https://host/path?token=abc&page=2", "https://host/path?token=[redacted]&page=2"),
    ("mail me at a@b.c, num_tokens=512 train.flops_per_token=1e9 kind=tokens",
     "mail me at a@b.c, num_tokens=512 train.flops_per_token=1e9 kind=tokens"),        # not credentials
    ("https://***@host api_token=[redacted]", "https://***@host api_token=[redacted]"),  # twice is once
])
def test_credentials_in_text_are_redacted(text, expected, remembered):
    assert redact_text(text, {}) == expected


def test_a_structure_keeps_its_shape_and_loses_its_credentials(remembered):
    config = {"workload": {"params": {"api_token": "s3cr3t-value", "apiKey": 123456789, "steps": 5}},
              "train": {"flops_per_token": 1.5e9, "token_count": True},
              "data": {"url": "pipe:curl https://u:p4ssw0rd@h/x-{0..9}.tar"},
              "overrides": ["+workload.params.api_token=s3cr3t-value", "data.num_workers=4"]}
    assert redact(config, {}) == {
        "workload": {"params": {"api_token": "[redacted]", "apiKey": "[redacted]", "steps": 5}},
        "train": {"flops_per_token": 1.5e9, "token_count": True},
        "data": {"url": "pipe:curl https://***@h/x-{0..9}.tar"},
        "overrides": ["+workload.params.api_token=[redacted]", "data.num_workers=4"]}


def test_environment_and_remembered_credentials_are_replaced_wherever_they_appear(remembered):
    found = secrets({"WANDB_API_KEY": "k" * 40, "HOME": "/home/me", "SHORT_TOKEN": "abc"})
    assert found == {"k" * 40: "[redacted:WANDB_API_KEY]"}         # named like a credential, long enough
    remember({"data": {"url": "https://u:p4ssw0rd-77@h/x.tar"}, "params": {"hf_token": "hf_remembered"}})
    line = f"key {'k' * 40} then p4ssw0rd-77 and hf_remembered alone"
    assert redact_text(line, {**found, **redact_module._remembered}) == \
        "key [redacted:WANDB_API_KEY] then *** and [redacted] alone"
    assert redact_file("trial.log", line.encode(), found) == "key [redacted:WANDB_API_KEY] then p4ssw0rd-77 " \
        "and hf_remembered alone".encode()                       # only what `found` names, plus the rules
    assert redact_file("steps.parquet", b"p4ssw0rd-77", found) == b"p4ssw0rd-77"   # binary: redacted before


def reads_shards(cfg, probe):
    """A user's workload: reads the shards through data.url as given (credentials and all), and
    prints what it was given, as careless code might."""
    import webdataset as wds

    assert cfg.workload.params["api_token"] == PARAM_SECRET        # the trial gets the real value
    assert URL_PASSWORD in cfg.data.url
    print(f"reading {cfg.data.url} with token {cfg.workload.params['api_token']} env {os.environ['HF_TOKEN']}")
    samples = list(wds.WebDataset(cfg.data.url, shardshuffle=False, empty_check=False))
    assert len(samples) == SAMPLES
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=1):
            probe.record(note=f"env={os.environ['HF_TOKEN']}")     # into steps.parquet
    return {"samples_read": float(len(samples))}


def write_shard(path: Path) -> Path:
    with tarfile.open(path, "w") as tar:
        for i in range(SAMPLES):
            data = f"sample {i}".encode()
            info = tarfile.TarInfo(f"{i:06d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def leaks(folder: Path):
    """(file, secret) for every secret found in a file's bytes or, for parquet, in its values."""
    found = []
    for path in (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            data += str(pq.read_table(path).to_pylist()).encode()
        found += [(str(path.relative_to(folder)), s) for s in SECRETS if s.encode() in data]
    return found


def test_an_error_line_that_quotes_a_value_is_redacted(remembered):
    from sweeper.errors import ConfigError

    error = ConfigError("data.url='pipe:curl -s https://user:PASSW0RD@host/x.tar': 1 of 1 shard(s) do not exist")
    assert str(error) == "data.url='pipe:curl -s https://***@host/x.tar': 1 of 1 shard(s) do not exist"


def test_the_launcher_hands_on_multirun_yaml_redacted_and_remembers_the_credentials(remembered):
    from omegaconf import OmegaConf

    from hydra_plugins.sweeper_ray_launcher._redact import redacted_yaml, remember_credentials

    config = OmegaConf.create({"data": {"url": "pipe:curl https://u:PASSW0RD-9@h/x.tar", "cache": "${oc.env:HOME}"},
                               "hydra": {"overrides": {"task": ["+workload.params.api_token=tok-123456"]}}})
    remember_credentials(config, [["+workload.params.api_token=tok-123456"]])
    text = redacted_yaml(config)
    assert "PASSW0RD-9" not in text and "tok-123456" not in text
    assert "https://***@h/x.tar" in text and "api_token=[redacted]" in text and "${oc.env:HOME}" in text
    assert redact_text("the workload printed tok-123456 and PASSW0RD-9") == \
        "the workload printed [redacted] and ***"                # anywhere, from now on


# MLflow at a server whose URI carries a password (unreachable: MLflow says so in one line), with
# the trials on Ray (Ray's own files searched too), and MLflow's own store in the run folder
# (mlflow.db and mlruns/ then hold every param and tag), the trials in the driver's process
# (executor=local: MLflow is written by the driver from the records, whichever executor ran them)
TRACKING = {"uri-with-password": [f"mlflow.tracking_uri=http://bob:{URI_PASSWORD}@127.0.0.1:9"],
            "local-store": ["executor=local"]}


@pytest.mark.slow
@pytest.mark.parametrize("tracking", sorted(TRACKING))
def test_no_secret_reaches_a_file_or_the_terminal(tmp_path, tracking):
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    tmp = Path(tempfile.mkdtemp(prefix="sw-", dir="/tmp"))   # short: Ray's socket paths must stay under 108 bytes
    try:
        output, run = sweep_with_secrets(tmp_path, tmp, TRACKING[tracking])
        assert [line for line in output.splitlines() if any(s in line for s in SECRETS)] == []
        assert leaks(tmp_path) + leaks(tmp) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    printed = "https://***@host/x.tar with token [redacted] env [redacted:HF_TOKEN]"     # what the trial printed
    if "executor=local" in TRACKING[tracking]:
        assert printed in output                                  # to the terminal, in the driver's process
    else:
        assert printed in "".join(p.read_text() for p in run.glob("trials/*/trial.log"))
    import pandas as pd

    steps = pd.concat(pd.read_parquet(p) for p in run.glob("trials/*/steps.parquet"))   # still readable files
    assert set(steps["note"]) == {"env=[redacted:HF_TOKEN]"}
    assert list(run.rglob("run-*.wandb"))
    # W&B's own staging and cache (searched above) sit beside the runs, none under HOME
    own = [f for d in ("cache", "data") for f in (run / "wandb" / d).rglob("*") if f.is_file()]
    assert own and not (tmp_path / "home" / ".local/share/wandb").exists()
    if tracking == "local-store":
        assert (run / "mlflow.db").stat().st_size > 0 and list((run / "mlruns").rglob("trial.json"))
    else:   # the server MLflow cannot reach is one line, at once, and the exit code stays 0 (sweep_with_secrets)
        assert len([line for line in output.splitlines() if "mlflow: " in line and "failed" in line]) == 1, output
        assert "Retrying" not in output


def _where_it_stopped(tmp: Path) -> str:
    """For a failed sweep's message: the driver's last phases (SWEEPER_TIMELINE) and the ends of
    Ray's raylet and driver logs, secrets masked. (Once, in CI, this sweep exited 1 after both
    trials with no table and no error line.)"""
    from sweeper import timeline

    phases = [name for _, _, name in timeline.read(str(tmp / "timeline"))][-6:]
    logs = sorted((tmp / "ray" / "session_latest" / "logs").glob("*"))
    tails = [f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
             for p in logs if p.name == "raylet.out" or p.name.startswith("python-core-driver")]
    text = f"\nlast phases: {phases}\n" + "\n".join(tails)
    for secret in [URL_PASSWORD, PARAM_SECRET, *ENV_SECRETS.values()]:
        text = text.replace(secret, "***")
    return text[-4000:]


def sweep_with_secrets(tmp_path: Path, tmp: Path, tracking):
    """A two-trial sweep (on Ray unless `tracking` says executor=local), with W&B (offline) and MLflow on,
    HOME and TMPDIR in the test's folders."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"pipe:cat {write_shard(tmp_path / 'shard.tar')} # https://user:{URL_PASSWORD}@host/x.tar"
    env = {**os.environ, **ENV_SECRETS, "HOME": str(home), "TMPDIR": str(tmp), "WANDB_MODE": "offline",
           "SWEEPER_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1", "SWEEPER_TIMELINE": str(tmp / "timeline"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for key in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "MLFLOW_TRACKING_URI"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
           "workload.target=tests.test_secrets:reads_shards", f"data.url='{url}'",
           f"+workload.params.api_token={PARAM_SECRET}", "workload.steps=3", "workload.warmup_steps=1",
           "repeats=1", "wandb.enabled=true", "wandb.mode=offline", "mlflow.enabled=true", *tracking,
           "data.batch_size=1,2"]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:] + _where_it_stopped(tmp)
    run = next((tmp_path / "results").glob("*/*/trials")).parent
    assert sorted(r["status"] for r in map(json.loads, map(Path.read_text, run.glob("trials/*/trial.json")))) \
        == ["ok", "ok"], output[-3000:]                    # both trials read the shard through the URL
    return output, run
