"""Loading timm-format checkpoints: other grids, patch sizes, DeiT extras, plans, strictness, errors."""
import pytest
import timm
import torch

from hydra_dense.backbones import ViT
from hydra_dense.checkpoints import CheckpointError, load_pretrained


def save(tmp_path, sd, name="ckpt.pth", wrap=True):
    path = tmp_path / name
    torch.save({"model": {f"module.{k}": v for k, v in sd.items()}} if wrap else sd, path)
    return path


def test_checkpoint_from_another_grid_matches_timm(tmp_path):
    ref = timm.create_model("vit_tiny_patch16_224", img_size=96, pretrained=False, num_classes=10,
                            dynamic_img_size=True).eval()
    path = save(tmp_path, ref.state_dict())
    ours = ViT("tiny", img_size=224, plan="msa").eval()
    report = load_pretrained(ours, path, strict=True)
    assert any("pos_embed resampled 6x6 -> 14x14" in n for n in report.adapted)
    assert any("classifier" in n for n in report.adapted)  # the head was dropped and said so
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(ours(x)[0].flatten(2).transpose(1, 2), ref.forward_features(x)[:, 1:],
                                   rtol=1e-4, atol=1e-5)


def test_deit_distilled_checkpoint_loads(tmp_path):
    deit = timm.create_model("deit_tiny_distilled_patch16_224", pretrained=False)
    path = save(tmp_path, deit.state_dict(), wrap=False)
    ours = ViT("tiny", plan={"default": "msa", "hydra_last": 2})
    report = load_pretrained(ours, path, strict=True)
    assert any("dist_token" in n for n in report.adapted)
    torch.testing.assert_close(ours.pos_embed, deit.pos_embed[:, [0] + list(range(2, 198))])


def test_a_task_checkpoint_yields_its_vit_under_any_prefix(tmp_path):
    """A detection task keeps its ViT under ``detector.backbone.vit.`` beside the pyramid and heads; a
    checkpoint with a teacher and a student ViT gives the teacher's."""
    from hydra_dense.checkpoints import read_state_dict

    vit = ViT("tiny", depth=2, plan="msa")
    task = {f"detector.backbone.vit.{k}": v for k, v in vit.state_dict().items()}
    task["detector.backbone.pyramid.0.weight"] = torch.zeros(3)
    task["detector.roi_heads.box_predictor.cls_score.weight"] = torch.zeros(3)
    got = read_state_dict(save(tmp_path, task, wrap=False))
    assert got.keys() == vit.state_dict().keys()
    assert all(torch.equal(got[k], v) for k, v in vit.state_dict().items())

    other = ViT("tiny", depth=2, plan="msa")
    both = {**{f"teacher.backbone.{k}": v for k, v in vit.state_dict().items()},
            **{f"student.backbone.{k}": v for k, v in other.state_dict().items()}}
    got = read_state_dict(save(tmp_path, both, name="pair.pth", wrap=False))
    assert got.keys() == vit.state_dict().keys() and torch.equal(got["blocks.0.attn.qkv.weight"],
                                                                 vit.state_dict()["blocks.0.attn.qkv.weight"])


def test_patch_size_is_resampled(tmp_path):
    src = ViT("tiny", depth=2, patch_size=16)
    dst = ViT("tiny", depth=2, patch_size=8, img_size=112)
    report = load_pretrained(dst, src.state_dict(), strict=True)
    assert any("patch_embed kernel resampled (16, 16) -> (8, 8)" in n for n in report.adapted)


def test_msa_checkpoint_initialises_hydra_and_vitdet_plans():
    msa = ViT("tiny", depth=4, plan="msa")
    hydra = ViT("tiny", depth=4, plan="hydra")
    load_pretrained(hydra, msa.state_dict(), strict=True)
    for a, b in zip(msa.state_dict().values(), hydra.state_dict().values()):
        assert torch.equal(a, b)
    vitdet = ViT("tiny", depth=4, class_token=False,
                 plan={"window_size": 7, "global_blocks": [1, 3], "global_attention": "hydra", "rel_pos": True})
    report = load_pretrained(vitdet, msa.state_dict(), strict=False, verbose=False)
    assert sorted(report.missing) == [f"blocks.{i}.attn.rel_pos_{a}" for i in (0, 2) for a in "hw"]
    assert any("cls_token" in n for n in report.adapted)
    assert torch.equal(vitdet.pos_embed, msa.pos_embed[:, 1:])


def test_missing_and_unexpected_keys_are_named():
    sd = ViT("tiny", depth=2).state_dict()
    del sd["blocks.1.mlp.fc2.bias"]
    sd["blocks.1.extra.weight"] = torch.zeros(1)
    model = ViT("tiny", depth=2)
    with pytest.raises(CheckpointError, match=r"missing keys \['blocks.1.mlp.fc2.bias'\].*unexpected keys \['blocks.1.extra.weight'\]"):
        load_pretrained(model, sd, strict=True)
    report = load_pretrained(model, sd, strict=False, verbose=False)
    assert report.missing == ["blocks.1.mlp.fc2.bias"] and report.unexpected == ["blocks.1.extra.weight"]


def test_shape_mismatch_and_unreadable_files(tmp_path):
    with pytest.raises(CheckpointError, match=r"checkpoint tensors do not fit the model.*cls_token has shape \(1, 1, 384\) but the model expects \(1, 1, 192\)"):
        load_pretrained(ViT("tiny", depth=1), ViT("small", depth=1).state_dict())
    with pytest.raises(FileNotFoundError, match="nope.pth does not exist"):
        load_pretrained(ViT("tiny", depth=1), tmp_path / "nope.pth")
    bad = tmp_path / "broken.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="broken.pth could not be read"):
        load_pretrained(ViT("tiny", depth=1), bad)


def test_pretrained_init_arg(tmp_path):
    src = ViT("tiny", depth=2)
    path = save(tmp_path, src.state_dict())
    m = ViT("tiny", depth=2, plan="hydra", pretrained=str(path), pretrained_strict=True)
    assert torch.equal(m.blocks[1].attn.qkv.weight, src.blocks[1].attn.qkv.weight)
