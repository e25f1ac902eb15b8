"""DDP on CPU (gloo, 2 processes) for the three tasks, kill -9 and resume, a failing rank.

Each run is ``tools/train.py`` in a subprocess, as on a cluster. The data are tiny and made here;
validation sets have 5 samples so the two ranks get 3 and 2 (no sample repeated or dropped).
"""
import json
import signal
import subprocess

import pytest
import torch

from tests.helpers.tiny_runs import ROOT, last_val_metrics, newest_checkpoint, ok, train, weights, write_config

TASKS = ["segmentation", "detection", "video"]
KILL = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.KillAt","init_args":{"step":%d}}'


def _same_metrics(a: dict, b: dict) -> None:
    assert a.keys() == b.keys(), (a, b)
    for k in a:
        assert (a[k] != a[k] and b[k] != b[k]) or a[k] == b[k], (k, a[k], b[k])


# per task, what else the DDP run exercises: the detectors with find_unused_parameters off (every
# parameter must get a gradient, even on batches without objects); bf16-mixed with gradient
# accumulation. (SyncBatchNorm runs on GPUs only: tools/gpu_check.py trains under configs/cluster/gpu_ddp.yaml.)
DDP_EXTRAS = {
    "segmentation": [],
    "detection": [],
    "video": ["--trainer.precision=bf16-mixed", "--trainer.accumulate_grad_batches=2"],
}


@pytest.mark.parametrize("task", TASKS)
def test_two_processes_metrics_equal_one_process(task, tmp_path):
    """A 2-process DDP fit completes; its logged validation metrics (synchronised over ranks with
    3 + 2 samples) equal a 1-process validation of the same final weights, bit for bit."""
    cfg = write_config(task, tmp_path)
    # video through the shipped configs/cluster/cpu_gloo.yaml, the others with --trainer.strategy=ddp
    launch = dict(cluster="cpu_gloo") if task == "video" else dict(procs=2)
    ok(train("fit", cfg, tmp_path / "ddp", "--checkpoint_every_n_steps=4", *DDP_EXTRAS[task], **launch))
    ddp = last_val_metrics(tmp_path / "ddp")
    ckpt = newest_checkpoint(tmp_path / "ddp")
    assert torch.load(ckpt, weights_only=False)["global_step"] == (12 if task == "segmentation" else 8)
    precision = [a for a in DDP_EXTRAS[task] if "precision" in a]
    ok(train("validate", cfg, tmp_path / "one", f"--ckpt_path={ckpt}", *precision))
    _same_metrics(ddp, last_val_metrics(tmp_path / "one"))
    if task == "detection":  # one merged COCO results file, every val image once, same as 1 process
        files = [sorted(d.rglob("predictions/*.json"))[-1] for d in (tmp_path / "ddp", tmp_path / "one")]
        merged, single = (json.loads(f.read_text()) for f in files)
        assert len({r["image_id"] for r in merged}) == 5
        assert [(r["image_id"], r["category_id"]) for r in merged] == \
            [(r["image_id"], r["category_id"]) for r in single]


# (task, steps, checkpoint every, kill after): every task killed in the middle of its second epoch
# (its own sampler, augmentation and RNG state restored mid-epoch); the checkpoint written at the
# last batch of an epoch is the loop's, not a task's, so one task covers it (train batches per
# epoch: segmentation 10, detection 6, video 8)
RESUME_CASES = [pytest.param("segmentation", 16, 4, 13, id="segmentation-mid_epoch"),
                pytest.param("segmentation", 16, 5, 11, id="segmentation-epoch_end"),
                pytest.param("detection", 6, 4, 5, id="detection-mid_epoch"),
                pytest.param("video", 12, 5, 11, id="video-mid_epoch")]
WORKERS = "--data.init_args.num_workers=2"  # the shipped configs' value: prefetching workers


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The uninterrupted run of each (task, steps), trained once and shared by the resume cases."""
    done: dict = {}

    def get(task: str, steps: int):
        if (task, steps) not in done:
            tmp = tmp_path_factory.mktemp(f"{task}_{steps}")
            cfg = write_config(task, tmp, steps=steps, val_every=steps // 2)  # the resumed part validates too
            ok(train("fit", cfg, tmp / "full", "--checkpoint_every_n_steps=4", WORKERS))
            done[task, steps] = cfg, tmp / "full"
        return done[task, steps]
    return get


@pytest.mark.parametrize("task,steps,every,kill", RESUME_CASES)
def test_kill_minus_nine_and_resume_reproduces_the_run(task, steps, every, kill, uninterrupted, tmp_path):
    """SIGKILL after a checkpoint, ``--ckpt_path last``, with 2 data-loader workers: same final
    weights and metrics as the uninterrupted run (model, optimizer, schedule, epoch position, RNG
    restored; the tiny models use drop-path, mixup for video, proposal sampling for detection)."""
    cfg, full_dir = uninterrupted(task, steps)
    killed = train("fit", cfg, tmp_path / "crash", f"--checkpoint_every_n_steps={every}", WORKERS, KILL % kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert torch.load(newest_checkpoint(tmp_path / "crash"), weights_only=False)["global_step"] == kill - kill % every
    resumed = ok(train("fit", cfg, tmp_path / "crash", f"--checkpoint_every_n_steps={every}", WORKERS,
                       "--ckpt_path=last"))
    assert "resuming from" in resumed.stdout + resumed.stderr
    full, again = weights(newest_checkpoint(full_dir)), weights(newest_checkpoint(tmp_path / "crash"))
    assert full.keys() == again.keys()
    for k in full:
        assert torch.equal(full[k], again[k]), k
    _same_metrics(last_val_metrics(full_dir), last_val_metrics(tmp_path / "crash"))


def test_kill_and_resume_under_ddp(tmp_path):
    """Same with 2 processes: rank 0 (the launcher) is SIGKILLed; the other rank must not linger,
    and the resumed 2-process run ends with the uninterrupted 2-process run's weights."""
    cfg = write_config("segmentation", tmp_path)
    ok(train("fit", cfg, tmp_path / "full", "--checkpoint_every_n_steps=4", procs=2))
    killed = train("fit", cfg, tmp_path / "crash", "--checkpoint_every_n_steps=4", KILL % 6, procs=2, timeout=180)
    assert killed.returncode != 0
    ok(train("fit", cfg, tmp_path / "crash", "--checkpoint_every_n_steps=4", "--ckpt_path=last", procs=2))
    full, again = weights(newest_checkpoint(tmp_path / "full")), weights(newest_checkpoint(tmp_path / "crash"))
    for k in full:
        assert torch.equal(full[k], again[k]), k


def test_torchrun_launch_equals_lightning_launch(tmp_path):
    """The torchrun route of docs/clusters.md (Lightning reads the torchelastic environment) trains the same
    model as Lightning's own launcher: identical final weights."""
    import os
    import sys

    cfg = write_config("segmentation", tmp_path)
    ok(train("fit", cfg, tmp_path / "lightning", "--checkpoint_every_n_steps=4", cluster="cpu_gloo"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "tools" / "train.py"), "fit", "--config", str(cfg), "--config",
           str(ROOT / "configs" / "cluster" / "cpu_gloo.yaml"), f"--trainer.default_root_dir={tmp_path / 'torchrun'}",
           "--checkpoint_every_n_steps=4"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    ok(subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300))
    a, b = weights(newest_checkpoint(tmp_path / "lightning")), weights(newest_checkpoint(tmp_path / "torchrun"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("task,rank", [("segmentation", 0), ("segmentation", 1), ("detection", 1), ("video", 1)])
def test_a_failing_rank_ends_the_whole_job(task, rank, tmp_path):
    """One rank raises mid-training: the job exits non-zero within a bounded time, no hang."""
    cfg = write_config(task, tmp_path, steps=40)
    fail = f'--trainer.callbacks+={{"class_path":"tests.helpers.crash_callbacks.RaiseAt","init_args":{{"step":3,"rank":{rank}}}}}'
    try:
        proc = train("fit", cfg, tmp_path / "run", fail, procs=2, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rank {rank} failed but the job was still running after 240 s: the other rank hangs")
    assert proc.returncode != 0
    assert f"injected failure on rank {rank}" in proc.stdout + proc.stderr


def test_scaling_tool_measures_one_and_two_processes(tmp_path):
    """tools/scaling.py end to end on tiny data, and the ring all-reduce formula by hand."""
    import sys

    from hydra_dense.bench.scaling import allreduce_seconds
    from tests.helpers.tiny_runs import ROOT

    assert allreduce_seconds(1e9, 8, 100.0) == pytest.approx(1e9 * 2 * 7 / 8 / 100e9)
    assert allreduce_seconds(1e9, 1, 100.0) == 0.0
    cfg = write_config("segmentation", tmp_path)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "scaling.py"), "--config", str(cfg), "--procs", "1,2",
                           "--steps", "2", "--warmup", "1", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = (tmp_path / "out" / "scaling.csv").read_text().splitlines()
    assert rows[0].startswith("processes,threads_per_process,global_batch")
    one, two = (r.split(",") for r in rows[1:3])
    assert (one[0], one[2], two[0], two[2]) == ("1", "2", "2", "4")  # global batch doubles
    assert float(one[4]) > 0 and float(two[4]) > 0
    comm = (tmp_path / "out" / "comm_cost.md").read_text()
    assert "ade20k_upernet_vit_b16.yaml" in comm and "nccl-tests" in comm


def _batch(task, model):
    """A small training batch of the right kind (detection: one image with an object, one without)."""
    if task == "segmentation":
        return torch.randn(2, 3, 64, 64), torch.randint(0, model.hparams.num_classes, (2, 64, 64)), None, torch.arange(2)
    if task == "video":
        return torch.randn(2, 3, 16, 56, 56), torch.randint(0, model.hparams.num_classes, (2,)), torch.arange(2)
    images = [torch.rand(3, 96, 128), torch.rand(3, 80, 96)]
    targets = [dict(boxes=torch.tensor([[10.0, 10.0, 50.0, 60.0]]), labels=torch.tensor([1]), image_id=torch.tensor(0)),
               dict(boxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long), image_id=torch.tensor(1))]
    if model.with_masks:
        targets[0]["masks"] = torch.zeros(1, 96, 128, dtype=torch.uint8)
        targets[0]["masks"][0, 10:60, 10:50] = 1
        targets[1]["masks"] = torch.zeros(0, 80, 96, dtype=torch.uint8)
    model.detector.transform.min_size, model.detector.transform.max_size = (128,), 128  # small, for speed
    return images, targets, torch.arange(2)


SHIPPED = sorted(str(p.relative_to(ROOT)) for d in ("segmentation", "detection", "video")
                 for p in (ROOT / "configs" / d).glob("*.yaml"))


@pytest.mark.parametrize("config", SHIPPED)
def test_every_parameter_of_shipped_configs_gets_a_gradient(config):
    """DDP runs with find_unused_parameters=False (configs/cluster): a trainable parameter without
    a gradient would stop a GPU job at its second step. One training step of each shipped task
    config (real architecture, small inputs) must reach every trainable parameter."""
    from hydra_dense.bench.scaling import model_from_config

    torch.manual_seed(0)
    model = model_from_config(ROOT / config)
    model.log = lambda *a, **k: None  # no trainer attached
    model.train()
    model.training_step(_batch(config.split("/")[1], model), 0).backward()
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not unused, unused
