"""The package as installed: the wheel ships the configs and the Hydra plugins, and a user's own
`conf/` beside their code adds sweeps and workloads (hydra_plugins/sweeper_searchpath).
.ci/run goes further: it installs the wheel in a fresh virtual environment and dry-runs every
shipped sweep from a folder outside the checkout."""
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT, checkout_first

SHIPPED_CONF = ROOT / "conf"      # the wheel carries it as sweeper/conf


@pytest.mark.slow
def test_wheel_holds_configs_and_hydra_plugins(tmp_path):
    # Build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout,
    # and setuptools ships stale files left in build/lib.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("sweeper", "workloads", "hydra_plugins", "conf"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # Without build isolation when this setuptools can build wheels by itself (70.1+), so no
    # registry is needed; else pip fetches the build requirements as `pip install .` does.
    own_setuptools = importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
           *(["--no-build-isolation"] if own_setuptools else []), str(src)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("sweeper-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    assert "sweeper/conf/config.yaml" in names
    shipped = {f"sweeper/conf/{p.relative_to(SHIPPED_CONF).as_posix()}" for p in SHIPPED_CONF.rglob("*.yaml")}
    sweeps = {n for n in shipped if n.startswith("sweeper/conf/sweep/")}
    assert len(sweeps) >= 3 and "sweeper/conf/sweep/dataloader.yaml" in sweeps
    assert shipped <= names, sorted(shipped - names)
    assert "hydra_plugins/sweeper_ray_launcher/ray_launcher.py" in names
    assert "hydra_plugins/sweeper_searchpath/sweeper_searchpath.py" in names
    assert "hydra_plugins/__init__.py" not in names      # a namespace package, as Hydra requires
    assert not any(n.startswith(("conf/", "tests/")) for n in names)


def _user_folder(tmp_path):
    """A user's project: a workload module and conf/ with a sweep and a workload of its own."""
    user = tmp_path / "myproject"
    (user / "conf" / "sweep").mkdir(parents=True)
    (user / "conf" / "workload").mkdir()
    (user / "mywork.py").write_text("def run(cfg, probe):\n    return {}\n")
    (user / "conf" / "sweep" / "mine.yaml").write_text(
        "# @package _global_\n"
        "sweep:\n  name: mine\n  description: my own workload\n"
        "workload:\n  target: mywork:run\n"
        "hydra:\n  sweeper:\n    params:\n      data.num_workers: 0,1\n")
    (user / "conf" / "workload" / "mine.yaml").write_text("target: mywork:run\nsteps: 5\n")
    return user


def _dry_run(cwd, tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "sweeper", *args, "dry_run=true", "wandb.enabled=false",
           f"results_dir={tmp_path / 'results'}"]
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    trials = [line for line in lines[1:] if line.startswith("  ")]
    assert lines[0].startswith("dry run: ") and int(lines[0].split()[2]) == len(trials), result.stdout
    return lines[0], trials


@pytest.mark.slow
def test_users_own_conf_beside_their_code_adds_a_sweep_and_a_workload(tmp_path):
    user = _user_folder(tmp_path)
    assert ROOT not in user.parents

    head, trials = _dry_run(user, tmp_path, "+sweep=mine")
    assert "of sweep 'mine'" in head and len(trials) == 2
    assert [t.split()[3] for t in trials] == ["data.num_workers=0", "data.num_workers=1"]

    head, trials = _dry_run(user, tmp_path, "workload=mine", "data.num_workers=1,2")
    assert len(trials) == 2 and all("workload=mine" in t for t in trials)

    # the shipped sweeps still come from the package
    head, trials = _dry_run(user, tmp_path, "+sweep=dataloader", "repeats=1")
    assert "of sweep 'dataloader'" in head and len(trials) == 16


@pytest.mark.slow
def test_hydra_searchpath_override_adds_a_folder_of_any_name(tmp_path):
    user = _user_folder(tmp_path)
    shutil.move(user / "conf", user / "configs")     # no ./conf now: nothing added by default
    result = subprocess.run([sys.executable, "-m", "sweeper", "+sweep=mine", "dry_run=true"], cwd=user,
                            env={**os.environ, "PYTHONPATH": checkout_first()}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and "mine" in result.stderr

    head, trials = _dry_run(user, tmp_path, "+sweep=mine", f"hydra.searchpath=[file://{user / 'configs'}]")
    assert "of sweep 'mine'" in head and len(trials) == 2


def test_search_path_plugin_leaves_other_hydra_apps_alone(tmp_path, monkeypatch):
    from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
    from hydra_plugins.sweeper_searchpath.sweeper_searchpath import PROVIDER, SweeperSearchPathPlugin

    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    for main, added in [(f"file://{SHIPPED_CONF}", True), (str(SHIPPED_CONF), True),
                        (str(tmp_path / "elsewhere"), False), ("pkg://someapp.conf", False)]:
        search_path = ConfigSearchPathImpl()
        search_path.append("main", main)
        SweeperSearchPathPlugin().manipulate_search_path(search_path)
        found = [e.path for e in search_path.get_path() if e.provider == PROVIDER]
        assert found == ([f"file://{(tmp_path / 'conf').resolve()}"] if added else []), main


def test_configs_come_from_the_package_when_installed_else_from_the_checkout(tmp_path, monkeypatch):
    from sweeper import confdir

    checkout = tmp_path / "checkout"
    (checkout / "sweeper").mkdir(parents=True)
    monkeypatch.setattr(confdir, "PACKAGE", checkout / "sweeper")
    assert confdir.conf_dir() == checkout / "conf"                 # editable or PYTHONPATH
    (checkout / "sweeper" / "conf").mkdir()
    assert confdir.conf_dir() == checkout / "conf"                 # a folder without the configs
    (checkout / "sweeper" / "conf" / "config.yaml").write_text("{}")
    assert confdir.conf_dir() == checkout / "sweeper" / "conf"     # the wheel's layout
