"""The busy-machine check of CPU timings, on a clock the test controls: a process that got its
threads' time reads as quiet, one that got half of it (another job on its cores) as busy."""
import itertools
from types import SimpleNamespace

import torch

from hydra_dense.bench import cpu_share as module
from hydra_dense.bench.cpu_share import cpu_share


def _clock(monkeypatch, wall: float, cpu: float, threads: int = 2):
    walls, cpus = itertools.chain([100.0, 100.0 + wall]), itertools.chain([50.0, 50.0 + cpu])
    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: next(walls), process_time=lambda: next(cpus)))
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    monkeypatch.setattr(module.os, "cpu_count", lambda: threads)


def test_a_timing_that_got_its_threads_time_is_quiet(monkeypatch):
    _clock(monkeypatch, wall=10.0, cpu=19.0)
    with cpu_share(torch.device("cpu")) as share:
        pass
    assert share.share == 0.95 and not share.busy and share.note() == ""


def test_a_timing_that_got_half_of_it_is_marked_disturbed(monkeypatch):
    _clock(monkeypatch, wall=10.0, cpu=10.0)
    with cpu_share(torch.device("cpu")) as share:
        pass
    assert share.busy and "got 50 % of its 2 threads' time" in share.note()


def test_on_a_gpu_the_cpu_share_says_nothing(monkeypatch):
    _clock(monkeypatch, wall=10.0, cpu=1.0)
    with cpu_share(torch.device("cuda")) as share:
        pass
    assert not share.busy and share.note() == ""
