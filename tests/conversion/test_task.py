"""MSA -> Hydra conversion on a tiny ViT with random MSA weights: the error falls, only attention
learns, the checkpoint loads strictly into its plan only, a killed run resumes exactly, bad input
is named before anything is written."""
import copy
import signal

import lightning as L
import pytest
import torch
import yaml

from hydra_dense.backbones import ViT
from hydra_dense.checkpoints import load_pretrained
from hydra_dense.checkpoints.pretrained import CheckpointError
from hydra_dense.conversion import ConversionTask
from hydra_dense.data.segmentation import SampleError
from hydra_dense.data.unlabeled import UnlabeledImageDataModule
from tests.helpers.images import make_images
from tests.helpers.tiny_runs import COMMON_TRAINER, ROOT, ok, train

KILL = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.KillAt","init_args":{"step":%d}}'
VIT = dict(size=None, embed_dim=32, depth=2, num_heads=2, patch_size=8, img_size=32)


def tiny_vit(plan="msa", **kw):
    return ViT(**dict(VIT, **kw), plan=plan)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return make_images(tmp_path_factory.mktemp("unlabeled"))


@pytest.fixture(scope="module")
def msa_source(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("src") / "msa.pth"
    torch.save(tiny_vit("msa").state_dict(), path)
    return path


def dm_for(images, **kw):
    return UnlabeledImageDataModule(root=str(images), crop_size=32, batch_size=4, val_batch_size=4, num_workers=0,
                                    val_every=4, **kw)


def test_conversion_lowers_the_error_and_trains_only_attention(images, msa_source, tmp_path):
    out = tmp_path / "converted" / "vit.pth"
    task = ConversionTask(tiny_vit({"default": "hydra", "local": "dwc3"}), source=str(msa_source), output=str(out),
                          lr=3e-3, warmup_steps=2)
    teacher = copy.deepcopy(task._teacher.state_dict())
    start = copy.deepcopy(task.backbone.state_dict())
    trainer = L.Trainer(max_steps=30, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, num_sanity_val_steps=0, enable_model_summary=False)
    trainer.fit(task, dm_for(images))
    before, after = task.error_before, task.error_after
    assert torch.isfinite(before).all() and (after < 0.7 * before).all(), (before, after)
    # the final tokens through the student's own stream: every block's error compounded
    feat_before, feat_after = float(task.feature_error_before), float(task.feature_error_after)
    assert 0 < feat_after < feat_before, (feat_before, feat_after)
    assert all(torch.equal(v, task._teacher.state_dict()[k]) for k, v in teacher.items()), "teacher changed"
    changed = {k for k, v in task.backbone.state_dict().items() if not torch.equal(v, start[k])}
    assert changed and all(".attn." in k for k in changed), sorted(changed)
    assert any(".attn.local." in k for k in changed) and any(".attn.qkv." in k for k in changed)
    # the written checkpoint: strict into its plan, the same model; another plan is refused by name
    same = tiny_vit({"default": "hydra", "local": "dwc3"})
    load_pretrained(same, out, strict=True)
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(same(x)[0], task.backbone.eval()(x)[0])
    with pytest.raises(CheckpointError, match=r"blocks\.0\.attn\.qkv/proj \(hydra\+dwc3 vs msa\)"):
        load_pretrained(tiny_vit("msa"), out, strict=True)
    with pytest.raises(CheckpointError, match=r"unexpected keys \['blocks\.0\.attn\.local\.conv\.weight'"):
        load_pretrained(tiny_vit("hydra"), out, strict=True)
    table = out.with_name("vit_errors.md").read_text()
    assert "| mean |" in table and "hydra+dwc3" in table and f"{feat_before:.3f} -> {feat_after:.3f}" in table
    assert out.with_name("vit_errors.csv").read_text().startswith("block,teacher,student,error_before")
    # a second conversion into the same file: the same conversion may replace it, another plan may not
    ConversionTask(tiny_vit({"default": "hydra", "local": "dwc3"}), source=str(msa_source), output=str(out))
    with pytest.raises(ValueError, match=r"model.output: .*vit.pth holds another conversion \(plan .*'local': 'dwc3'"):
        ConversionTask(tiny_vit("hydra"), source=str(msa_source), output=str(out))
    notes = tmp_path / "notes.pth"
    notes.write_text("someone's file")
    with pytest.raises(ValueError, match="notes.pth exists and is not a converted checkpoint"):
        ConversionTask(tiny_vit("hydra"), source=str(msa_source), output=str(notes))
    assert notes.read_text() == "someone's file"


def test_hybrid_plan_converts_only_its_hydra_blocks(images, msa_source, tmp_path):
    task = ConversionTask(tiny_vit({"default": "msa", "hydra_last": 1}), source=str(msa_source),
                          output=str(tmp_path / "c.pth"), measure_before=False)
    assert task.blocks == [1]
    assert not any(p.requires_grad for p in task.backbone.blocks[0].parameters())
    assert not any(p.requires_grad for n, p in task.backbone.blocks[1].named_parameters() if ".attn." not in f".{n}")


def test_bad_inputs_are_named_and_nothing_is_written(images, msa_source, tmp_path):
    out = tmp_path / "never.pth"
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match=f"no images .* under {empty}"):
        UnlabeledImageDataModule(root=str(empty))
    with pytest.raises(FileNotFoundError, match="image folder .*missing does not exist"):
        UnlabeledImageDataModule(root=str(tmp_path / "missing"))
    broken = make_images(tmp_path / "with_broken", n=8)
    (broken / "broken.jpg").write_bytes(b"not a jpeg")
    dm = UnlabeledImageDataModule(root=str(broken), val_root=str(images), crop_size=16, num_workers=0)
    dm.setup("fit")
    bad = [i for i, f in enumerate(dm.datasets["train"].files) if f.name == "broken.jpg"][0]
    with pytest.raises(SampleError, match="cannot read image .*broken.jpg"):
        dm.datasets["train"][bad]
    dm = UnlabeledImageDataModule(root=str(broken), val_root=str(images), crop_size=16, num_workers=0, skip_bad=True)
    dm.setup("fit")
    assert dm.datasets["train"][bad] is None and dm.datasets["train"].skipped == 1

    no_attn = tmp_path / "resnet.pth"
    torch.save({"conv1.weight": torch.zeros(8, 3, 7, 7), "fc.weight": torch.zeros(10, 8)}, no_attn)
    with pytest.raises(CheckpointError, match="resnet.pth has no attention weights"):
        ConversionTask(tiny_vit("hydra"), source=str(no_attn), output=str(out))
    wider = tmp_path / "wider.pth"
    torch.save(ViT(**dict(VIT, embed_dim=48), plan="msa").state_dict(), wider)
    with pytest.raises(CheckpointError, match="do not fit the model"):
        ConversionTask(tiny_vit("hydra"), source=str(wider), output=str(out))
    deeper = tmp_path / "deeper.pth"
    torch.save(ViT(**dict(VIT, depth=3), plan="msa").state_dict(), deeper)
    with pytest.raises(CheckpointError, match="deeper.pth has 3 blocks but the backbone .* has 2"):
        ConversionTask(tiny_vit("hydra"), source=str(deeper), output=str(out))
    with pytest.raises(ValueError, match="converts no block"):
        ConversionTask(tiny_vit("msa"), source=str(msa_source), output=str(out))
    with pytest.raises(FileNotFoundError, match="model.source: checkpoint .*nothing.pth does not exist"):
        ConversionTask(tiny_vit("hydra"), source=str(tmp_path / "nothing.pth"), output=str(out))
    assert not out.exists()


def _config(images, source, out, tmp_path, steps=8):
    cfg = dict(
        seed_everything=0,
        trainer=dict(COMMON_TRAINER, max_steps=steps, val_check_interval=4),
        model=dict(class_path="hydra_dense.conversion.ConversionTask", init_args=dict(
            backbone=dict(class_path="hydra_dense.backbones.ViT", init_args=dict(VIT, plan={"default": "hydra",
                                                                                          "local": "dwc3"})),
            source=str(source), output=str(out), lr=3e-3, warmup_steps=2)),
        data=dict(class_path="hydra_dense.conversion.ConversionImages", init_args=dict(
            root=str(images), crop_size=32, batch_size=4, val_batch_size=4, num_workers=0, val_every=4)))
    path = tmp_path / "convert.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_killed_conversion_resumes_to_the_same_weights(images, msa_source, tmp_path):
    full_out, crash_out = tmp_path / "full.pth", tmp_path / "crash.pth"
    cfg = _config(images, msa_source, full_out, tmp_path)
    ok(train("fit", cfg, tmp_path / "full", "--checkpoint_every_n_steps=4"))
    crash = [f"--model.init_args.output={crash_out}", "--checkpoint_every_n_steps=4"]
    killed = train("fit", cfg, tmp_path / "crash", *crash, KILL % 6)
    assert killed.returncode == -signal.SIGKILL and not crash_out.exists(), "nothing written half-way"
    resumed = ok(train("fit", cfg, tmp_path / "crash", *crash, "--ckpt_path=last"))
    assert "resuming from" in resumed.stdout + resumed.stderr
    full = torch.load(full_out, weights_only=True)
    again = torch.load(crash_out, weights_only=True)
    assert full["hydra_dense"]["error_before"] == again["hydra_dense"]["error_before"]
    for k, v in full["state_dict"].items():
        assert torch.equal(v, again["state_dict"][k]), k
    assert "| mean |" in resumed.stdout


def test_cli_entry_point_and_errors(images, msa_source, tmp_path):
    import subprocess
    import sys

    cfg = _config(images, msa_source, tmp_path / "out.pth", tmp_path, steps=2)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "convert.py"), "--config", str(cfg),
                           f"--trainer.default_root_dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out.pth").is_file() and "error_before" in proc.stdout
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "convert.py"), "--config", str(cfg),
                           f"--model.init_args.source={tmp_path / 'missing.pth'}"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "model.source: checkpoint" in proc.stderr and "Traceback" not in proc.stderr


def test_task_training_split_as_images_through_the_cli(msa_source, tmp_path):
    """data.task_config under the CLI: the task's data module gets its own init_args (LightningCLI's
    given-hyperparameters context must not leak into it), and the table names the task's images."""
    from tests.helpers.images import make_ade

    seg_root = tmp_path / "seg"
    make_ade(seg_root, n_train=8, n_val=4)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"data": {"class_path": "hydra_dense.data.SegmentationDataModule", "init_args": {
        "root": str(seg_root), "layout": "ade20k", "num_classes": 4, "num_workers": 0}}}))
    out = tmp_path / "out.pth"
    cfg = _config(tmp_path, msa_source, out, tmp_path, steps=2)
    ok(train("fit", cfg, tmp_path / "run", "--data.init_args.root=null", f"--data.init_args.task_config={task}"))
    table = out.with_name("out_errors.md").read_text()
    assert f"task {task} (train split, labels unused): 6 train / 2 val images" in table


def moving_square_clips(n: int, frames: int = 4, size: int = 16, seed: int = 0) -> torch.Tensor:
    """``(n, 3, frames, size, size)`` clips: a bright square moving one way over a noisy gradient."""
    g = torch.Generator().manual_seed(seed)
    clips = torch.linspace(-1, 1, size).expand(size, size).repeat(n, 3, frames, 1, 1).clone()
    clips += 0.1 * torch.randn(clips.shape, generator=g)
    for i in range(n):
        y, x = torch.randint(0, size - 6, (2,), generator=g).tolist()
        dy, dx = torch.randint(-1, 2, (2,), generator=g).tolist()
        for t in range(frames):
            yy, xx = min(max(y + dy * t, 0), size - 4), min(max(x + dx * t, 0), size - 4)
            clips[i, :, t, yy:yy + 4, xx:xx + 4] = 2.0
    return clips


def test_video_vit_conversion_lowers_the_error_and_loads_strictly(tmp_path):
    """A joint VideoViT converts like an image ViT: its blocks see the (t, h, w) grid, the local
    branch is a 3x3x3 conv, and the task weights' ``backbone.`` prefix is dropped on reading."""
    from torch.utils.data import TensorDataset

    from hydra_dense.backbones import VideoViT

    video = dict(size=None, embed_dim=32, depth=2, num_heads=2, patch_size=4, tubelet_size=2, num_frames=4,
                 img_size=16)
    torch.manual_seed(0)
    source = tmp_path / "video_task.pt"  # what a trained video task saves: backbone.* + its head
    torch.save({**{f"backbone.{k}": v for k, v in VideoViT(**video, plan="msa").state_dict().items()},
                "head.1.weight": torch.zeros(4, 32)}, source)
    out = tmp_path / "video_converted.pth"
    plan = {"default": "hydra", "local": "dwc3"}
    task = ConversionTask(VideoViT(**video, plan=plan), source=str(source), output=str(out), lr=3e-3,
                          warmup_steps=2)
    teacher = copy.deepcopy(task._teacher.state_dict())
    dm = L.LightningDataModule.from_datasets(TensorDataset(moving_square_clips(16)),
                                             TensorDataset(moving_square_clips(8, seed=1)), batch_size=4)
    trainer = L.Trainer(max_steps=30, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, num_sanity_val_steps=0, enable_model_summary=False)
    trainer.fit(task, dm)
    before, after = task.error_before, task.error_after
    assert torch.isfinite(before).all() and (after < 0.7 * before).all(), (before, after)
    assert all(torch.equal(v, task._teacher.state_dict()[k]) for k, v in teacher.items()), "teacher changed"
    assert task.backbone.blocks[0].attn.local.conv.weight.dim() == 5  # (D, 1, 3, 3, 3) over (t, h, w)
    same = VideoViT(**video, plan=plan)
    load_pretrained(same, out, strict=True)
    clips = moving_square_clips(2, seed=2)
    torch.testing.assert_close(same(clips), task.backbone.eval()(clips))
    with pytest.raises(ValueError, match="layout: joint"):
        ConversionTask(VideoViT(**video, plan=plan, layout="divided"), source=str(source), output=str(out))


def test_conversion_error_tool_measures_the_written_checkpoint_at_each_crop_size(images, msa_source, tmp_path):
    """At the conversion's own crop size the tool reproduces the errors the conversion wrote (before:
    the source weights as the plan; after: the converted checkpoint); other sizes set the token count."""
    from hydra_dense.conversion.measure import errors_at_crop_sizes, main

    out = tmp_path / "out.pth"
    cfg = _config(images, msa_source, out, tmp_path, steps=4)
    ok(train("fit", cfg, tmp_path / "run"))
    with open(out.with_name("out_errors.csv")) as fh:
        mean = [r for r in __import__("csv").DictReader(fh) if r["block"] == "mean"][0]
    after = errors_at_crop_sizes(str(cfg), [32, 64], converted=str(out))
    before = errors_at_crop_sizes(str(cfg), [32])
    assert [r["tokens"] for r in after] == [16, 64] and set(after[0]) >= {"block_0", "block_1"}
    assert after[0]["mean_block_error"] == pytest.approx(float(mean["error_after"]), rel=1e-4)
    assert before[0]["mean_block_error"] == pytest.approx(float(mean["error_before"]), rel=1e-4)
    assert after[1]["mean_block_error"] != pytest.approx(after[0]["mean_block_error"], rel=1e-3)
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        main(["--config", str(cfg), "--converted", str(tmp_path / "missing.pth"), "--crop-sizes", "32"])


def _relative_error(pred: torch.Tensor, target: torch.Tensor) -> float:
    return float((pred - target).norm() / target.norm())


def test_whole_network_alignment_lowers_the_feature_error_and_trains_the_whole_student(images, tmp_path):
    """Stage 2 starts from stage 1's checkpoint, trains MLPs and norms too, and brings the features
    the heads read (ViT.forward's maps at out_indices) closer to an independently built MSA teacher."""
    # a random tiny MSA whose attention matters (qkv / proj scaled up) and a short stage 1, so that the
    # features keep an error (about 0.16) that stage 2 can reduce
    torch.manual_seed(0)
    sd = {k: v * 4 if k.endswith(("attn.qkv.weight", "attn.proj.weight")) else v
          for k, v in tiny_vit("msa").state_dict().items()}
    msa_source = tmp_path / "sharp_msa.pth"
    torch.save(sd, msa_source)
    plan = {"default": "hydra", "local": "dwc3"}
    stage1 = tmp_path / "stage1.pth"
    trainer_args = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        num_sanity_val_steps=0, enable_model_summary=False)
    first = ConversionTask(tiny_vit(plan, out_indices=[0, 1]), source=str(msa_source), output=str(stage1),
                           lr=3e-3, warmup_steps=2)
    L.Trainer(max_steps=3, **trainer_args).fit(first, dm_for(images))
    stage2 = tmp_path / "stage2.pth"
    task = ConversionTask(tiny_vit(plan, out_indices=[0, 1]), source=str(msa_source), output=str(stage2),
                          objective="features", student_init=str(stage1), lr=1e-3, warmup_steps=2)
    start = copy.deepcopy(task.backbone.state_dict())
    L.Trainer(max_steps=40, **trainer_args).fit(task, dm_for(images))
    changed = {k for k, v in task.backbone.state_dict().items() if not torch.equal(v, start[k])}
    assert any(".mlp." in k for k in changed) and any(".attn.qkv." in k for k in changed) and "norm.weight" in changed
    # the independent check: a plain MSA ViT with the source weights against each stage's checkpoint
    teacher = tiny_vit("msa", out_indices=[0, 1]).eval()
    load_pretrained(teacher, msa_source, strict=True)
    dm = dm_for(images)
    dm.setup("fit")
    x = torch.stack([dm.datasets["val"][i][0] for i in range(len(dm.datasets["val"]))])
    errors = {}
    for name, path in (("stage1", stage1), ("stage2", stage2)):
        student = tiny_vit(plan, out_indices=[0, 1]).eval()
        load_pretrained(student, path, strict=True)
        with torch.no_grad():
            errors[name] = [_relative_error(s, t) for s, t in zip(student(x), teacher(x))]
    assert errors["stage1"][-1] > 0.12 and errors["stage2"][-1] < 0.8 * errors["stage1"][-1], errors
    # the errors the task wrote are the same measurement (over batches of 4 there, so only close)
    before, after = task.level_error_before.tolist(), task.level_error_after.tolist()
    assert after[-1] < before[-1]
    assert before[-1] == pytest.approx(errors["stage1"][-1], rel=0.25) and after[-1] == pytest.approx(
        errors["stage2"][-1], rel=0.25)
    table = stage2.with_name("stage2_errors.md").read_text()
    assert "| features@1 |" in table and "whole student" in table
    meta = torch.load(stage2, weights_only=True)["hydra_dense"]
    assert meta["objective"] == "features" and meta["student_init"] == str(stage1) and meta["levels"] == [0, 1]


def test_alignment_refuses_a_student_init_made_for_another_plan(msa_source, tmp_path):
    other = tmp_path / "msa_as_converted.pth"
    torch.save({"state_dict": tiny_vit("msa").state_dict(),
                "hydra_dense": dict(converted_blocks=[0, 1], attention_kinds=["linear", "linear"], plan={})}, other)
    with pytest.raises(CheckpointError, match=r"msa_as_converted\.pth does not match the model's attention plan"):
        ConversionTask(tiny_vit("hydra"), source=str(msa_source), objective="features", student_init=str(other))
    with pytest.raises(FileNotFoundError, match="model.student_init: converted checkpoint .*nothing.pth"):
        ConversionTask(tiny_vit("hydra"), source=str(msa_source), objective="features",
                       student_init=str(tmp_path / "nothing.pth"))
