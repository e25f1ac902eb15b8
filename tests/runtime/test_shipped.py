"""Shipped configs are found in one place: the path as given, then the source checkout, then
``<prefix>/share/hydra_dense`` (a plain ``pip install .``); jobs start jobs as ``python -m``."""
import os
import sys
from pathlib import Path

import pytest

from hydra_dense.comparison import worker
from hydra_dense.runtime import shipped


def test_a_shipped_config_is_found_in_the_checkout_and_in_an_installed_prefix(tmp_path, monkeypatch):
    name = "configs/segmentation/demo_digits.yaml"
    monkeypatch.chdir(tmp_path)  # not the checkout's own folder
    assert shipped.find_shipped(name) == shipped.source_root() / name  # this checkout
    installed = tmp_path / "prefix"
    (installed / "share" / "hydra_dense" / "configs" / "segmentation").mkdir(parents=True)
    (installed / "share" / "hydra_dense" / name).write_text("seed_everything: 0\n")
    monkeypatch.setattr(shipped, "source_root", lambda: None)  # installed without -e: no checkout
    monkeypatch.setattr(sys, "prefix", str(installed))
    assert shipped.find_shipped(name) == installed / "share" / "hydra_dense" / name
    given = tmp_path / "mine.yaml"
    given.write_text("x: 1\n")
    assert shipped.find_shipped(given) == given  # a path given is taken as it is
    with pytest.raises(FileNotFoundError, match="--config: configs/nowhere.yaml does not exist"):
        shipped.shipped_file("configs/nowhere.yaml", "--config")


def test_a_job_starts_a_job_as_a_module_with_the_package_importable():
    cmd = shipped.job_command(worker, "r/request.json")
    assert cmd[1:] == ["-m", "hydra_dense.comparison.worker", "r/request.json"] and cmd[0] == sys.executable
    first = Path(shipped.job_environment()["PYTHONPATH"].split(os.pathsep)[0])
    assert (first / "hydra_dense" / "__init__.py").is_file()
