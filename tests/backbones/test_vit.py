"""The image ViT: timm equivalence in all-MSA mode, any input size, plans, padding masks."""
import pytest
import timm
import torch

from hydra_dense.attention import AttentionPlan
from hydra_dense.backbones import SimpleFeaturePyramid, ViT, ViTWithPyramid


def tiny(**kw):
    kw.setdefault("depth", 3)
    return ViT("tiny", **kw).eval()


@pytest.mark.parametrize("hw", [(224, 224), (200, 232), (61, 47)])
def test_all_msa_reproduces_timm(hw):
    ref = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, dynamic_img_size=True,
                            dynamic_img_pad=True).eval()
    ours = ViT("tiny", plan="msa").eval()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, *hw)
    with torch.no_grad():
        expect = ref.forward_features(x)[:, 1:]
        got = ours(x)[0].flatten(2).transpose(1, 2)
    assert (expect - got).abs().max() <= 1e-5


def test_output_shapes_and_feature_info():
    m = tiny(plan={"default": "msa", "hydra_last": 1}, out_indices=[0, -1], patch_size=14)
    maps = m(torch.randn(2, 3, 57, 30))
    assert [tuple(f.shape) for f in maps] == [(2, 192, 5, 3)] * 2
    assert m.feature_info == [dict(num_chs=192, reduction=14, module="blocks.0"),
                              dict(num_chs=192, reduction=14, module="blocks.2")]
    assert m.attention_kinds == ["msa", "msa", "hydra"]


def test_set_plan_keeps_weights_and_changes_the_op():
    m = tiny(plan="msa")
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        before = m(x)[0]
        qkv = m.blocks[1].attn.qkv.weight.clone()
        m.set_plan("hydra")
        after = m(x)[0]
    assert torch.equal(m.blocks[1].attn.qkv.weight, qkv)
    assert type(m.blocks[1].attn).__name__ == "HydraAttention"
    assert (before - after).abs().max() > 1e-3


@pytest.mark.parametrize("plan", ["hydra", "msa", AttentionPlan(window_size=2, global_blocks=[1], global_attention="hydra")])
def test_padding_inside_a_batch_changes_nothing(plan):
    m = tiny(plan=plan, class_token=not isinstance(plan, AttentionPlan))
    img = torch.randn(1, 3, 50, 70)
    canvas = torch.zeros(2, 3, 96, 112)
    canvas[0, :, :50, :70] = img[0]
    canvas[1] = torch.randn(3, 96, 112)
    pad = torch.ones(2, 96, 112, dtype=torch.bool)
    pad[0, :50, :70] = False
    pad[1] = False
    with torch.no_grad():
        alone = m(img)[0]
        batched = m(canvas, pad)[0]
    torch.testing.assert_close(batched[:1, :, :4, :5], alone, rtol=1e-4, atol=1e-5)
    # without the mask, the padding does leak into Hydra's global sum (the test can fail)
    if plan == "hydra":
        with torch.no_grad():
            leaky = m(canvas)[0]
        assert (leaky[:1, :, :4, :5] - alone).abs().max() > 1e-3


def test_token_padding_mask_marks_only_fully_padded_tokens():
    m = tiny(patch_size=4)
    pad = torch.ones(1, 10, 13, dtype=torch.bool)
    pad[0, :5, :9] = False  # valid region covers rows 0-1 fully, row 2 partly; cols 0-2
    tok = m.token_padding_mask(pad).reshape(1, 3, 4)
    expect = torch.ones(1, 3, 4, dtype=torch.bool)
    expect[0, :2, :3] = False
    assert torch.equal(tok, expect)


def test_gradient_checkpointing_gives_same_gradients():
    a = tiny(plan="hydra", grad_checkpointing=False).train()
    b = tiny(plan="hydra", grad_checkpointing=True).train()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 32, 32)
    a(x)[0].square().mean().backward()
    b(x)[0].square().mean().backward()
    torch.testing.assert_close(a.blocks[0].attn.qkv.weight.grad, b.blocks[0].attn.qkv.weight.grad)


def test_custom_size_and_bad_arguments():
    m = ViT(None, embed_dim=64, depth=2, num_heads=4, patch_size=8)
    assert m(torch.randn(1, 3, 16, 16))[0].shape == (1, 64, 2, 2)
    with pytest.raises(ValueError, match="out_indices entry 12 is out of range for depth 12"):
        ViT("tiny", out_indices=[12])
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        ViT("huge")
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        ViT(None, embed_dim=64, depth=1, num_heads=5)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, H, W\)"):
        tiny()(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match="pad_mask must be bool of shape"):
        tiny()(torch.randn(1, 3, 32, 32), torch.zeros(1, 16, 32, dtype=torch.bool))
    with pytest.raises(ValueError, match="hydra_blocks index 5 is out of range"):
        tiny(plan={"hydra_blocks": [5]})


def test_simple_feature_pyramid_strides_and_channels():
    vit = tiny(class_token=False, out_indices=[-1])
    neck = ViTWithPyramid(vit, out_channels=32, top_block=True)
    out = neck(torch.randn(1, 3, 128, 96))
    assert list(out) == ["p2", "p3", "p4", "p5", "p6"]
    assert [tuple(v.shape[-2:]) for v in out.values()] == [(32, 24), (16, 12), (8, 6), (4, 3), (2, 2)]
    assert all(v.shape[1] == 32 for v in out.values()) and neck.out_channels == 32
    with pytest.raises(ValueError, match="scale 3.0 not supported"):
        SimpleFeaturePyramid(64, scales=(3.0,))


TIMM_PLANS = {"msa": "msa", "hydra": "hydra", "hybrid": {"default": "msa", "hydra_last": 1},
              "hydra+dwc3": {"default": "hydra", "local": "dwc3"}, "none": "none",
              "linear": {"default": "linear", "linear_heads": 4},
              "vitdet_hydra": AttentionPlan(window_size=2, global_blocks=[1], global_attention="hydra"),
              "vitdet_msa+rel_pos": AttentionPlan(window_size=2, global_blocks=[2], global_attention="msa", rel_pos=True)}


@pytest.mark.parametrize("name", sorted(TIMM_PLANS))
def test_timm_feature_calls_give_the_maps_of_forward(name):
    torch.manual_seed(0)
    m = tiny(plan=TIMM_PLANS[name], out_indices=[0, 2], out_norm=False, img_size=64)
    for blk in m.blocks:  # make the (zero-initialised) local branch matter
        if getattr(blk.attn, "local", None) is not None:
            torch.nn.init.normal_(blk.attn.local.conv.weight, std=0.2)
    x = torch.randn(2, 3, 60, 76)
    pad = torch.zeros(2, 60, 76, dtype=torch.bool)
    pad[1, 40:], pad[1, :, 50:] = True, True
    with torch.no_grad():
        for mask in (None, pad):
            want = m(x, mask)
            got = m.forward_intermediates(x, indices=[0, 2], intermediates_only=True, pad_mask=mask)
            final, maps = m.forward_intermediates(x, indices=[0, 2], pad_mask=mask)
            for a, b, c in zip(want, got, maps):
                torch.testing.assert_close(a, b, rtol=0, atol=0)
                torch.testing.assert_close(a, c, rtol=0, atol=0)
            tokens = m.forward_tokens(x, mask)[0][-1]
            torch.testing.assert_close(final, m.norm(tokens), rtol=0, atol=0)
            torch.testing.assert_close(m.forward_features(x, pad_mask=mask), m.norm(tokens), rtol=0, atol=0)
            nlc = m.forward_intermediates(x, indices=1, output_fmt="NLC", intermediates_only=True, pad_mask=mask)
            torch.testing.assert_close(nlc[0], want[1].flatten(2).transpose(1, 2), rtol=0, atol=0)
        # timm's own feature wrapper (what create_model(features_only=True) builds for ViTs)
        from timm.models._features import FeatureGetterNet

        feats = FeatureGetterNet(m, out_indices=[0, 2], prune=False)(x)
        for a, b in zip(m(x), feats):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_forward_intermediates_reproduces_timm_in_all_msa_mode():
    ref = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, dynamic_img_size=True,
                            dynamic_img_pad=True).eval()
    ours = ViT("tiny", plan="msa").eval()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        for kw in (dict(indices=3, norm=True), dict(indices=[1, 5], return_prefix_tokens=True, stop_early=True),
                   dict(indices=2, output_fmt="NLC", output_dict=True, return_prefix_tokens=True)):
            a, b = ref.forward_intermediates(x, **kw), ours.forward_intermediates(x, **kw)
            torch.testing.assert_close(b, a, rtol=1e-5, atol=2e-5)
    assert [f["module"] for f in ours.feature_info] == ["blocks.11"]


def test_traced_padded_positions_match_timms_per_image_resampling():
    """The export form of per-image positions (fixed shapes, sizes from the mask's values) against
    timm's resample_abs_pos_embed run on each image's own valid grid, zeros on padded tokens."""
    from timm.layers import resample_abs_pos_embed

    torch.manual_seed(0)
    m = ViT("tiny", depth=1, patch_size=4, img_size=40, pos_embed_antialias=False).eval()
    torch.nn.init.normal_(m.pos_embed)
    sizes = [(13, 9), (5, 7), (10, 3), (14, 12)]  # smaller and larger than the 10x10 native grid
    valid = torch.zeros(len(sizes), 14, 12, dtype=torch.bool)
    for b, (vh, vw) in enumerate(sizes):
        valid[b, :vh, :vw] = True
    got = m.traced_padded_positions(valid)
    for b, (vh, vw) in enumerate(sizes):
        want = resample_abs_pos_embed(m.pos_embed, new_size=(vh, vw), old_size=(10, 10), num_prefix_tokens=1,
                                      antialias=False)
        grid = got[b, 1:].reshape(14, 12, -1)
        torch.testing.assert_close(got[b, :1], want[0, :1])
        torch.testing.assert_close(grid[:vh, :vw].reshape(vh * vw, -1), want[0, 1:], atol=2e-5, rtol=1e-5)
        assert not grid[vh:].any() and not grid[:, vw:].any()
    with pytest.raises(ValueError, match="pos_embed_antialias: false"):
        ViT("tiny", depth=1, patch_size=4, img_size=40).traced_padded_positions(valid)


def test_timms_own_callers_of_the_feature_api_work_and_masks_go_in_as_pad_mask():
    """timm's inherited ``get_intermediate_layers`` calls ``forward_intermediates(..., attn_mask=...)``:
    the overrides keep timm's signatures, so it gives the maps of ``forward``."""
    torch.manual_seed(0)
    m = tiny(plan="hydra", out_indices=[0, 2], out_norm=False, img_size=64)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        got = m.get_intermediate_layers(x, n=[0, 2], reshape=True)
        for a, b in zip(m(x), got):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        with pytest.raises(ValueError, match="takes no attn_mask / is_causal; image padding goes in as pad_mask"):
            m.forward_features(x, attn_mask=torch.ones(1, 1, 17, 17, dtype=torch.bool))
