import os

import pytest
import torch

os.environ.setdefault("HYDRA_DENSE_FUSED", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Parallel workers (./run.sh test): one thread each, inherited by the processes a test
    # launches, so two workers on two cores do not oversubscribe them.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
else:
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
