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


# ---- the fast loop: tests that start another process are marked ``slow`` ---------------------
# A test is slow when it (or a tests/ helper it calls, followed down) uses one of these: a training
# subprocess (tools/train.py, tools/*.py), the comparison job (one worker process per run) or a
# spawned child; the heaviest in-process tests carry the mark by hand. ``./run.sh test -m "not slow"``
# is the fast loop; ``./run.sh test`` runs all.
_PROCESS_MODULES = {"subprocess", "multiprocessing", "torch.multiprocessing"}
# package functions that start processes: the comparison job (one worker per run) and the fresh-process
# memory measurement
_PROCESS_CALLS = ("hydra_dense.compare:main", "hydra_dense.compare:run_comparison",
                  "hydra_dense.convert.from_run:main", "hydra_dense.convert.from_run:convert_run",
                  "hydra_dense.bench.memory:peak_memory_mb_isolated")


def _process_starters() -> set:
    import importlib

    found = set()
    for spec in _PROCESS_CALLS:
        module, name = spec.split(":")
        found.add(getattr(importlib.import_module(module), name))
    return found


def _names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _starts_a_process(fn, seen: set) -> bool:
    import inspect
    import sys

    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _names(code)
    if names & _PROCESS_MODULES:
        return True
    scopes = [fn.__globals__]
    scopes += [vars(sys.modules[n]) for n in names if n in sys.modules and n.startswith(("tests", "hydra_dense"))]
    for name in names:
        for scope in scopes:
            obj = scope.get(name)
            if obj is None:
                continue
            if inspect.ismodule(obj) and obj.__name__ in _PROCESS_MODULES:
                return True
            if callable(obj) and obj in _STARTERS:
                return True
            if inspect.isfunction(obj) and obj.__module__.startswith("tests") and _starts_a_process(obj, seen):
                return True
    return False


def pytest_collection_modifyitems(config, items):
    global _STARTERS
    _STARTERS = _process_starters()
    for item in items:
        fn = getattr(item, "function", None)
        fixtures = [item._fixtureinfo.name2fixturedefs.get(n, [None])[-1] for n in item.fixturenames] \
            if hasattr(item, "_fixtureinfo") else []
        funcs = [fn] + [getattr(d, "func", None) for d in fixtures if d is not None]
        seen: set = set()
        if any(f is not None and _starts_a_process(f, seen) for f in funcs):
            item.add_marker(pytest.mark.slow)
