"""Resumable sampling, the NaN guard, atomic checkpoints, SLURM requeue, and CLI errors that come
before any training."""
import os
from pathlib import Path
import signal
import stat
import sys

import lightning as L
import pytest
import torch

from hydra_dense.data.sampling import ResumableSampler, SeededSamples, sample_seed
from hydra_dense.data.segmentation import SegmentationDataModule
from hydra_dense.runtime import NonFiniteLossGuard
from hydra_dense.runtime.nonfinite import NonFiniteLossError
from tests.helpers.crash_callbacks import NaNLossAt
from tests.helpers.images import make_ade, tiny_backbone
from tests.helpers.tiny_runs import newest_checkpoint, ok, train, weights, write_config


# ---- sampling -------------------------------------------------------------------------------
def test_sampler_shards_skips_and_is_fixed_by_seed_and_epoch():
    data = list(range(11))
    one = ResumableSampler(data, 1, 0, shuffle=True, seed=3)
    one.set_epoch(2)
    order = [i for i, _ in one]
    assert sorted(order) == data and order == [i for i, _ in one]  # same epoch, same order
    one.set_epoch(3)
    assert [i for i, _ in one] != order
    ranks = [ResumableSampler(data, 2, r, shuffle=True, seed=3) for r in range(2)]
    for s in ranks:
        s.set_epoch(2)
    shards = [[i for i, _ in s] for s in ranks]
    assert set(shards[0]) | set(shards[1]) == set(data)
    one.set_epoch(2)
    one.resume(epoch=2, batches=2, batch_size=3)
    assert [i for i, _ in one] == order[6:]
    assert [i for i, _ in one] == order  # the skip applies to one iteration only
    one.resume(epoch=1, batches=2, batch_size=3)  # another epoch's position: ignored
    assert [i for i, _ in one] == order
    seeds = dict(ResumableSampler(data, 1, 0, seed=3))
    assert seeds[4] == sample_seed(3, 0, 4) != sample_seed(3, 1, 4) != sample_seed(4, 0, 4)


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_augmentation_is_the_same_for_any_workers_or_ranks(tmp_path):
    """A sample's random crop/flip/colour is fixed by (seed, epoch, index): 0 or 2 workers, 1 or 2
    ranks give identical tensors, and loading leaves the global RNG untouched."""
    root = make_ade(tmp_path / "ade", n_train=8, n_val=2, size=32)

    def epoch_samples(workers: int, world: int) -> dict[int, torch.Tensor]:
        dm = SegmentationDataModule(str(root), "ade20k", num_classes=4, crop_size=(24, 24), base_size=(32, 32),
                                    batch_size=2, val_batch_size=2, num_workers=workers)
        dm.setup("fit")
        out = {}
        for rank in range(world):
            dm._world = lambda rank=rank: (world, rank)  # what a trainer would report
            loader = dm.train_dataloader()
            loader.sampler.set_epoch(1)
            for images, masks, _, idx in loader:
                out.update({int(i): images[j] for j, i in enumerate(idx)})
        return out

    state = torch.get_rng_state()
    base = epoch_samples(0, 1)
    assert torch.equal(torch.get_rng_state(), state)
    for workers, world in ((2, 1), (0, 2)):
        other = epoch_samples(workers, world)
        assert other.keys() == base.keys()
        assert all(torch.equal(other[i], base[i]) for i in base)
    ds = SeededSamples(list(range(3)))
    assert ds[(1, 7)] == 1 and len(ds) == 3


# ---- NaN guard ------------------------------------------------------------------------------
def _seg_fit(tmp_path, *callbacks, steps=6):
    root = make_ade(tmp_path / "ade", n_train=8, n_val=2)
    dm = SegmentationDataModule(str(root), "ade20k", num_classes=4, crop_size=(32, 32), base_size=(32, 32),
                                batch_size=2, val_batch_size=2, num_workers=0)
    from hydra_dense.tasks import SegmentationTask

    task = SegmentationTask(tiny_backbone(), num_classes=4, decode_head="linear", lr=1e-3, warmup_steps=1)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        callbacks=list(callbacks))
    trainer.fit(task, datamodule=dm)
    return task


def test_nonfinite_loss_stops_naming_the_step(tmp_path):
    with pytest.raises(NonFiniteLossError, match=r"loss nan at global step 3 \(epoch 0, batch 3\)"):
        _seg_fit(tmp_path, NonFiniteLossGuard(), NaNLossAt(step=3))


def test_nonfinite_loss_skip_counts_and_never_updates_on_nan(tmp_path):
    guard = NonFiniteLossGuard(action="skip", max_skips=2)
    task = _seg_fit(tmp_path, guard, NaNLossAt(step=3))
    assert guard.skipped == 1
    assert all(torch.isfinite(p).all() for p in task.parameters())
    with pytest.raises(NonFiniteLossError, match="more than --nonfinite.max_skips=0"):
        _seg_fit(tmp_path, NonFiniteLossGuard(action="skip", max_skips=0), NaNLossAt(step=2))


def test_without_the_guard_nan_reaches_the_weights(tmp_path):
    """The failure the guard prevents is real: unguarded, one NaN step poisons the model."""
    task = _seg_fit(tmp_path, NaNLossAt(step=3))
    assert not all(torch.isfinite(p).all() for p in task.parameters())


def _stand_in(tmp_path, name: str, script: str) -> Path:
    """A fake cluster command ``name`` (shell ``script``) in a folder to put first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bin_dir


# ---- checkpoints on disk --------------------------------------------------------------------
def test_kill_during_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    cfg = write_config("segmentation", tmp_path)
    die = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.KillDuringSave","init_args":{"n":2}}'
    killed = train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=4", die)
    assert killed.returncode == -signal.SIGKILL
    ckpt = newest_checkpoint(tmp_path / "run")
    assert torch.load(ckpt, weights_only=False)["global_step"] == 4  # the first save, whole
    assert list(ckpt.parent.glob(".last.ckpt.tmp-*"))  # the half-written second one, never renamed
    ok(train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=4", "--ckpt_path=last"))
    done = newest_checkpoint(tmp_path / "run")
    assert torch.load(done, weights_only=False)["global_step"] == 12
    assert not list(done.parent.parent.parent.rglob(".last.ckpt.tmp-*"))  # the stale half-file was removed


def test_a_full_disk_is_one_plain_line_and_the_previous_checkpoint_resumes(tmp_path):
    """The second save meets a full disk: one ``error:`` line naming the file, the free space and the
    checkpoint kept, exit 2, no traceback; no save is tried again on the way out, and the kept
    checkpoint resumes the run."""
    cfg = write_config("segmentation", tmp_path)
    full = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.DiskFullDuringSave","init_args":{"n":2}}'
    proc = train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=4", full)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "could not save" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "last.ckpt: not written, the disk holding" in line and "MB free" in line
    assert "the previous last.ckpt is kept" in line and "--ckpt_path last" in line
    ckpt = newest_checkpoint(tmp_path / "run")
    assert torch.load(ckpt, weights_only=False)["global_step"] == 4
    assert not list(ckpt.parent.glob(".last.ckpt.tmp-*"))  # the cut-short file is removed, not left to fill the disk
    ok(train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=4", "--ckpt_path=last"))
    assert torch.load(newest_checkpoint(tmp_path / "run"), weights_only=False)["global_step"] == 12


def test_last_checkpoint_holds_the_final_step_between_periodic_saves(tmp_path):
    """max_steps 6 with a save every 4 steps: last.ckpt ends at step 6 with the final weights, not at 4."""
    cfg = write_config("segmentation", tmp_path, steps=6, val_every=3)
    ok(train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=4"))
    saved = torch.load(newest_checkpoint(tmp_path / "run"), weights_only=False)
    assert saved["global_step"] == 6 and saved["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["completed"] == 6


def test_slurm_requeue_signal_saves_and_the_requeued_job_resumes(tmp_path):
    """SLURM emulated: job env vars and a fake ``scontrol`` on PATH. SIGUSR1 arrives mid-step; the
    hpc checkpoint is written at the step's end, ``scontrol requeue <job>`` is called, the run stops;
    the same command again (the requeued job) resumes and ends with the uninterrupted weights."""
    cfg = write_config("segmentation", tmp_path)
    ok(train("fit", cfg, tmp_path / "full", "--checkpoint_every_n_steps=4"))
    bin_dir = _stand_in(tmp_path, "scontrol", f"echo \"$@\" >> {tmp_path / 'scontrol.log'}\n")
    env = dict(SLURM_NTASKS="1", SLURM_NTASKS_PER_NODE="1", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0",
               SLURM_JOB_ID="4242", SLURM_JOB_NAME="train", SLURM_NODELIST="localhost",
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    usr1 = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.SignalAt","init_args":{"step":5}}'
    first = train("fit", cfg, tmp_path / "job", "--checkpoint_every_n_steps=4", usr1, env=env)
    ok(first)
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    hpc = list((tmp_path / "job").glob("hpc_ckpt_*.ckpt"))
    assert len(hpc) == 1 and torch.load(hpc[0], weights_only=False)["global_step"] == 6
    ok(train("fit", cfg, tmp_path / "job", "--checkpoint_every_n_steps=4", "--ckpt_path=last", env=env))
    full, again = weights(newest_checkpoint(tmp_path / "full")), weights(newest_checkpoint(tmp_path / "job"))
    assert all(torch.equal(full[k], again[k]) for k in full)


# ---- CLI errors before training -------------------------------------------------------------
def _cli(args, capsys):
    from hydra_dense.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code != 0
    return capsys.readouterr().err


@pytest.fixture
def seg_cfg(tmp_path):
    return write_config("segmentation", tmp_path)


def test_cli_unknown_key_wrong_type_and_missing_root_fail_at_parse(seg_cfg, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py"])
    base = ["fit", "--config", str(seg_cfg), f"--trainer.default_root_dir={tmp_path / 'r'}"]
    assert "lerning_rate" in _cli(base + ["--model.init_args.lerning_rate=0.1"], capsys)
    assert "Expected a <class 'float'>" in _cli(base + ["--model.init_args.lr=fast"], capsys)
    assert "does not exist" in _cli(base + [f"--data.init_args.root={tmp_path / 'nowhere'}"], capsys)
    assert "ignore" in _cli(base + ["--nonfinite.action=ignore"], capsys)
    assert not (tmp_path / "r").exists()  # nothing started


def test_cli_missing_or_mismatched_checkpoint_fails_before_training(seg_cfg, tmp_path, monkeypatch):
    from hydra_dense.cli import main
    from hydra_dense.checkpoints import CheckpointMismatchError

    monkeypatch.setattr(sys, "argv", ["train.py"])
    base = ["fit", "--config", str(seg_cfg), f"--trainer.default_root_dir={tmp_path / 'r'}"]
    with pytest.raises(FileNotFoundError, match="nope.ckpt does not exist"):
        main(base + [f"--ckpt_path={tmp_path / 'nope.ckpt'}"])
    ok(train("fit", seg_cfg, tmp_path / "small", "--trainer.max_steps=2"))
    ckpt = newest_checkpoint(tmp_path / "small")
    with pytest.raises(CheckpointMismatchError, match=r"shape differs \(checkpoint vs model\): .*32\) vs \(.*48\)"):
        main(base + [f"--ckpt_path={ckpt}", "--model.init_args.backbone.init_args.embed_dim=48"])
    with pytest.raises(CheckpointMismatchError, match=r"missing from the checkpoint: backbone\.blocks\.2\."):
        main(base + [f"--ckpt_path={ckpt}", "--model.init_args.backbone.init_args.depth=3"])
    assert not list((tmp_path / "r").rglob("*.ckpt"))


def test_ckpt_path_last_without_any_checkpoint_starts_fresh(seg_cfg, tmp_path):
    proc = ok(train("fit", seg_cfg, tmp_path / "r", "--trainer.max_steps=2", "--ckpt_path=last"))
    assert "starting from scratch" in proc.stdout + proc.stderr
    assert torch.load(newest_checkpoint(tmp_path / "r"), weights_only=False)["global_step"] == 2


@pytest.mark.parametrize("template", ["train_single_node.sbatch", "train_multi_node.sbatch"])
def test_slurm_templates_run_and_resume(template, tmp_path):
    """The sbatch scripts themselves, with a stand-in ``srun`` that runs the command once (CPU
    overrides after the config); run twice, the second run (a requeue) resumes the first."""
    import subprocess

    from tests.helpers.tiny_runs import ROOT, write_config

    cfg = write_config("segmentation", tmp_path)
    bin_dir = _stand_in(tmp_path, "srun", 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n')  # drop options
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", SLURM_SUBMIT_DIR=str(ROOT),
               HYDRA_DENSE_VENV=sys.prefix, RUN_DIR=str(tmp_path / "run"), SLURM_JOB_ID="77",
               SLURM_JOB_NAME="t", PYTHONPATH=str(ROOT))
    cpu = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.strategy=auto",
           "--trainer.precision=32-true", "--trainer.sync_batchnorm=false", "--checkpoint_every_n_steps=4"]
    cmd = ["bash", str(ROOT / "tools" / "slurm" / template), str(cfg)]
    first = subprocess.run(cmd + cpu + ["--trainer.max_steps=4"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run(cmd + cpu, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming from" in second.stdout + second.stderr
    assert torch.load(newest_checkpoint(tmp_path / "run"), weights_only=False)["global_step"] == 12


def test_sigterm_on_fit_keeps_the_checkpoint_and_exits_non_zero(tmp_path):
    """A scheduler reads exit 0 as a finished job: a run SIGTERM stopped must say it was stopped."""
    cfg = write_config("segmentation", tmp_path)
    stop = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.KillAt","init_args":{"step":4,"sig":"SIGTERM"}}'
    stopped = train("fit", cfg, tmp_path / "run", "--checkpoint_every_n_steps=2", stop)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    assert "SIGTERM received" in stopped.stderr and "--ckpt_path last" in stopped.stderr
    assert torch.load(newest_checkpoint(tmp_path / "run"), weights_only=False)["global_step"] >= 4
