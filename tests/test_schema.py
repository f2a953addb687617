"""Bad values fail with the dotted key and what to do."""
import pytest

from sweeper.errors import ConfigError
from sweeper.schema import root_config_from_dict, trial_config_from_dict


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


def test_root_checks_repeats_and_ignores_hydra():
    with pytest.raises(ConfigError, match="^repeats: must be 1 or more"):
        root_config_from_dict({"repeats": 0, "hydra": {"anything": 1}})
    assert root_config_from_dict({"repeats": 3, "hydra": {}}).repeats == 3


def test_good_values_pass():
    cfg = trial_config_from_dict({"data": {"num_workers": 2, "prefetch_factor": 4, "pin_memory": True}})
    assert (cfg.data.num_workers, cfg.data.prefetch_factor, cfg.data.pin_memory) == (2, 4, True)
