"""Bad values fail with the dotted key and what to do; each key has one declared role."""
import dataclasses

import pytest

from sweeper.errors import ConfigError
from sweeper.schema import (ROLES, DaliConfig, ImageConfig, Role, RootConfig, is_measurement, key_role,
                            measurement_keys, root_config_from_dict, trial_config_from_dict)


@pytest.mark.parametrize("values, message", [
    ({"data": {"num_workers": 0, "prefetch_factor": 2}}, "data.prefetch_factor: only applies with data.num_workers > 0"),
    ({"data": {"batch_size": -1}}, "data.batch_size: must be positive, got -1"),
    ({"data": {"num_workers": -2}}, "data.num_workers: must be 0 or more"),
    ({"data": {"seq_len": 0}}, "data.seq_len: must be positive"),
    ({"data": {"persistent_workers": True}}, "data.persistent_workers: needs data.num_workers > 0"),
    ({"workload": {"steps": 0}}, "workload.steps: must be positive"),
    ({"workload": {"target": "nocolon"}}, "workload.target: must look like"),
    ({"workload": {"device": "tpu"}}, "workload.device: must be one of"),
    ({"resources": {"isolation": "whatever"}}, "resources.isolation: must be one of"),
    ({"data": {"num_wrokers": 2}}, "data.num_wrokers: unknown key"),
])
def test_bad_values_name_their_key(values, message):
    with pytest.raises(ConfigError) as err:
        trial_config_from_dict(values)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("values, message", [
    ({"resources": {"memory_limit_gb": float("inf")}}, "resources.memory_limit_gb: must be a finite number, got inf"),
    ({"overnight": {"deadline": float("nan")}}, "overnight.deadline: must be a finite number, got nan"),
    ({"cost": {"gpu_hour_usd": {"H200": float("inf")}}}, "cost.gpu_hour_usd.H200: must be a positive price"),
])
def test_numbers_must_be_finite(values, message):
    with pytest.raises(ConfigError) as err:
        root_config_from_dict(values)
    assert str(err.value).startswith(message)


def test_root_checks_repeats_and_ignores_hydra():
    with pytest.raises(ConfigError, match="^repeats: must be 1 to 10000"):
        root_config_from_dict({"repeats": 0, "hydra": {"anything": 1}})
    assert root_config_from_dict({"repeats": 3, "hydra": {}}).repeats == 3


def test_nested_sections_are_built_typed_and_checked_under_their_dotted_key():
    cfg = trial_config_from_dict({"data": {"images": {"height": 10}, "dali": {"decoder": "mixed"}}})
    assert isinstance(cfg.data.images, ImageConfig) and isinstance(cfg.data.dali, DaliConfig)
    with pytest.raises(ConfigError, match=r"^data\.images\.height: must be positive, got 0"):
        trial_config_from_dict({"data": {"images": {"height": 0}}})
    with pytest.raises(ConfigError, match=r"^data\.dali\.threads: unknown key"):
        trial_config_from_dict({"data": {"dali": {"threads": 2}}})


# -- key roles ------------------------------------------------------------------------
@pytest.mark.parametrize("key, role", [
    ("data.num_workers", Role.MEASUREMENT),
    ("data.images.height", Role.MEASUREMENT),
    ("workload.params.anything", Role.MEASUREMENT),       # free-form params are what a user measures
    ("+workload.params.size=3", Role.MEASUREMENT),         # an override's text
    ("resources.cpus", Role.MEASUREMENT),                  # a trial's share of the machine
    ("resources.timeout_s", Role.PLACEMENT),
    ("data.cache_dir", Role.PLACEMENT),
    ("workload.spec", Role.PLACEMENT),
    ("executor", Role.PLACEMENT),
    ("ray.address", Role.PLACEMENT),
    ("wandb.enabled", Role.OUTPUT),
    ("history.enabled", Role.OUTPUT),
    ("report.enabled", Role.OUTPUT),
    ("results_dir", Role.OUTPUT),
    ("analysis.baseline", Role.OUTPUT),
    ("sweep.name", Role.RUN_CONTROL),
    ("repeats", Role.RUN_CONTROL),
    ("hydra.sweep.dir", Role.RUN_CONTROL),
    ("~resume", Role.RUN_CONTROL),
])
def test_key_role(key, role):
    assert key_role(key) is role
    assert is_measurement(key) == (role is Role.MEASUREMENT)


def test_every_section_declares_a_role_and_every_declared_key_exists():
    top = {f.name for f in dataclasses.fields(RootConfig)}
    assert top <= set(ROLES), f"sections without a declared role: {sorted(top - set(ROLES))}"
    root = RootConfig()
    for dotted in ROLES:
        if dotted == "hydra":
            continue
        node = root
        for part in dotted.split("."):
            assert hasattr(node, part), f"ROLES names {dotted!r}, which is no key of the schema"
            node = getattr(node, part)


def test_measurement_keys_keep_order_and_drop_other_roles():
    keys = ["sweep.name", "data.num_workers", "wandb.enabled", "probe.settle", "history.enabled", "data.cache_dir"]
    assert measurement_keys(keys) == ["data.num_workers", "probe.settle"]


# -- names that become folders ----------------------------------------------------------
@pytest.mark.parametrize("values, message", [
    ({"sweep": {"name": "../../X"}}, "sweep.name: must be a plain name, not a path, got '../../X'"),
    ({"sweep": {"name": "/abs/path"}}, "sweep.name: must be a plain name, not a path"),
    ({"sweep": {"name": "a" * 300}}, "sweep.name: is 300 characters long, more than 100; give a short name"),
    ({"sweep": {"name": "night ly"}}, "sweep.name: must be a plain name of ASCII letters, digits"),
    ({"sweep": {"name": ""}}, "sweep.name: must be a plain name of ASCII letters"),
    ({"run_id": "../../X"}, "run_id: must be a plain name, not a path"),
    ({"run_id": "/tmp/x"}, "run_id: must be a plain name, not a path"),
    ({"run_id": ".hidden"}, "run_id: must be a plain name of ASCII letters"),
    ({"overnight": {"sweeps": ["../dataloader"]}}, "overnight.sweeps: must be a plain name, not a path"),
])
def test_names_that_become_folders_must_be_plain(values, message):
    with pytest.raises(ConfigError) as err:
        root_config_from_dict(values)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["single", "nightly-loaders", "20261201-165431", "v1.2_b", "a" * 100])
def test_plain_names_pass(name):
    assert root_config_from_dict({"sweep": {"name": name}, "run_id": name}).sweep.name == name
