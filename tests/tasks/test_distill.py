"""Distillation while fine-tuning: the extra loss equals the relative squared error against an
independently built MSA ViT with the teacher's weights; the teacher is frozen and never saved;
a training run logs it; bad options are named."""
import pytest
import torch

from hydra_dense.backbones import ViT
from hydra_dense.tasks import SegmentationTask
from tests.helpers.tiny_runs import ok, train, write_config

VIT = dict(embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32, out_indices=[0, 1])


@pytest.fixture()
def teacher_weights(tmp_path):
    torch.manual_seed(1)
    path = tmp_path / "msa_teacher.pth"
    torch.save(ViT(None, plan="msa", **VIT).state_dict(), path)
    return path


def task_with(distill):
    torch.manual_seed(0)
    return SegmentationTask(ViT(None, plan="hydra", **VIT), num_classes=4, decode_head="uper", head_channels=16,
                            distill=distill)


def test_the_extra_loss_is_the_relative_error_to_an_independent_msa_vit(teacher_weights):
    task = task_with({"teacher": str(teacher_weights), "weight": 0.5}).train()
    x = torch.randn(2, 3, 32, 32)
    student = task.backbone(x)  # the task's own forward captures this
    with pytest.warns(UserWarning):  # self.log outside a Trainer
        extra = task.distillation_loss()
    reference = ViT(None, plan="msa", **VIT).eval()
    reference.load_state_dict(torch.load(teacher_weights, weights_only=True))
    with torch.no_grad():
        wanted = reference(x)
    expected = torch.stack([(s - t).square().mean() / t.square().mean() for s, t in zip(student, wanted)]).mean()
    torch.testing.assert_close(extra, 0.5 * expected)
    extra.backward()  # the gradient reaches the student only
    assert task.backbone.blocks[0].attn.qkv.weight.grad is not None
    assert not any(p.requires_grad for p in task._distill_teacher.parameters())
    assert not any(k.startswith("_distill") for k in task.state_dict())
    assert task.distillation_loss() is None  # one term per captured student pass
    task.eval()
    task.backbone(x)
    assert task.distillation_loss() is None  # evaluation passes are not distilled


def test_without_distill_nothing_changes(teacher_weights):
    task = task_with(None).train()
    task.backbone(torch.randn(1, 3, 32, 32))
    assert task.distillation_loss() is None


def test_bad_distill_options_are_named(teacher_weights, tmp_path):
    with pytest.raises(ValueError, match=r"model.distill: expected keys \['teacher', 'weight', 'plan'\]"):
        task_with({"teacher": str(teacher_weights), "wieght": 1.0})
    with pytest.raises(FileNotFoundError, match="nothing.pth"):
        task_with({"teacher": str(tmp_path / "nothing.pth")})


def test_a_run_with_distillation_logs_the_term(teacher_weights, tmp_path):
    config = write_config("segmentation", tmp_path, steps=2, val_every=2)
    ok(train("fit", config, tmp_path / "run", f'--model.init_args.distill={{"teacher": "{teacher_weights}"}}',
             "--model.init_args.backbone.init_args.drop_path_rate=0.0"))
    metrics = next((tmp_path / "run").rglob("metrics.csv")).read_text()
    assert "train_distill" in metrics.splitlines()[0]
