"""The tiny finished run the checkpoint and refusal tests load, once per test module."""
import pytest

from tests.helpers.tiny_runs import newest_checkpoint, ok, train, write_config


@pytest.fixture(scope="module")
def seg_run(tmp_path_factory):
    """A 2-step all-Hydra segmentation fit run: (its config, its last checkpoint)."""
    tmp = tmp_path_factory.mktemp("seg")
    config = write_config("segmentation", tmp, steps=2, val_every=2)
    ok(train("fit", config, tmp / "run"))
    return config, newest_checkpoint(tmp / "run")
