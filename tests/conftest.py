import json
import os
from pathlib import Path

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


# ---- the fast loop: tests measured slower than SLOW_SECONDS are marked ``slow`` ----------------------
# tests/durations.json holds each test's measured call time (seconds, on the 2-core CI machine, two
# workers). ``./run.sh test --record-durations`` measures them again and rewrites it; a test not in it
# yet counts as slow until measured, so a new slow test never lands in the fast loop unmarked.
# ``./run.sh test -m "not slow"`` is the fast loop; ``./run.sh test`` runs all.
SLOW_SECONDS = 4.0
DURATIONS = Path(__file__).with_name("durations.json")
_measured: dict[str, float] = {}


def pytest_addoption(parser):
    parser.addoption("--record-durations", action="store_true",
                     help=f"measure every test's call time and rewrite {DURATIONS.name} (the slow marks)")


def pytest_collection_modifyitems(config, items):
    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    for item in items:
        if known.get(item.nodeid, float("inf")) >= SLOW_SECONDS:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report):
    """Every test's call time (under xdist the controller gets every worker's reports too)."""
    if report.when == "call":
        _measured[report.nodeid] = round(report.duration, 2)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes the file
        return
    if session.config.getoption("--record-durations") and _measured:
        known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
        known.update(_measured)
        DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")
