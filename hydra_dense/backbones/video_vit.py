"""Video ViT on clips ``(B, C, T, H, W)``: tubelet embedding, joint or divided space-time attention.

Joint space-time attention (ViViT / VideoMAE) attends over all ``T/t * H/p * W/p`` tokens at
once — where Hydra's O(N) cost matters most. Divided attention (TimeSformer) runs a temporal
attention over the frames of each spatial position, then a spatial one inside each frame.
Both take the same attention plan as the image ViT.
"""
from __future__ import annotations

import math
from typing import Literal, Optional, Union

import torch
import torch.nn.functional as F
from timm.layers import DropPath, resample_patch_embed, trunc_normal_
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..attention import AttentionPlan, BlockAttention, TokenLayout
from .blocks import PlannedBackbone, PlannedBlock, apply_plan, attention_layer, swap_attention
from ..checkpoints.pretrained import LoadReport, _split_prefix, read_state_dict
from .sizes import vit_dims
from .vit import PlanLike

__all__ = ["VideoViT", "DividedSpaceTimeBlock"]


class DividedSpaceTimeBlock(nn.Module):
    """TimeSformer block: temporal attention (own qkv/proj, zero-init ``temporal_fc``) then a
    regular spatial :class:`PlannedBlock`. ``forward(x, layout)``: ``x`` is ``(B, t*h*w, D)``,
    ``layout.grid == (t, h, w)``.

    The temporal attention starts as a copy of the spatial one's weights, built as ``attention``
    asks on the 1-D time axis (block ``index``: odd blocks take a shifted plan's shifted windows).
    """

    def __init__(self, block: PlannedBlock, drop_path: float = 0.0, attention: Optional[BlockAttention] = None,
                 index: int = 0) -> None:
        super().__init__()
        dim = block.norm1.normalized_shape[0]
        self.temporal_norm = nn.LayerNorm(dim, eps=block.norm1.eps)
        arguments = attention.arguments(1, index % 2 == 1) if attention is not None else {}
        self.temporal_attn = swap_attention(block.attn, block.attn.kind, **arguments)
        self.temporal_fc = nn.Linear(dim, dim)
        nn.init.zeros_(self.temporal_fc.weight), nn.init.zeros_(self.temporal_fc.bias)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.block = block

    def forward(self, x: torch.Tensor, layout: TokenLayout) -> torch.Tensor:
        B, N, D = x.shape
        t, h, w = layout.grid
        xt = x.reshape(B, t, h * w, D).transpose(1, 2).reshape(B * h * w, t, D)
        yt = self.temporal_fc(self.temporal_attn(self.temporal_norm(xt), TokenLayout((t,), 0)))
        x = x + self.drop_path(yt.reshape(B, h * w, t, D).transpose(1, 2).reshape(B, N, D))
        xs = self.block(x.reshape(B * t, h * w, D), TokenLayout((h, w), 0))
        return xs.reshape(B, N, D)


class VideoViT(PlannedBackbone, nn.Module):
    """ViT on clips: ``(B, C, T, H, W)`` -> pooled ``(B, D)`` (``forward``) or a space-time map
    ``(B, D, T/t, H/p, W/p)`` (``forward_features``).

    Clips are zero-padded at the end to a multiple of ``tubelet_size`` frames and on the
    right/bottom to a multiple of ``patch_size`` pixels. Position embeddings are learned on the
    ``num_frames/t x img_size/p x img_size/p`` grid and resampled (trilinear) to any clip size.
    There is no cls token: the pooled feature is the mean of the normed tokens (VideoMAE).

    Args:
        size / embed_dim / depth / num_heads: as :class:`~hydra_dense.backbones.ViT`.
        patch_size, tubelet_size: the 3-D patch is ``tubelet_size x patch_size x patch_size``.
        num_frames, img_size: the grid position embeddings are stored at.
        layout: ``joint`` (one attention over all tokens) or ``divided`` (time, then space).
        plan: attention plan (window attention is not supported for video).
        pretrained_image: a timm-format *image* ViT checkpoint to inflate (patch kernel averaged
            over the tubelet, positions repeated over time; for ``divided``, the temporal
            attention starts as a copy of the spatial one, as in TimeSformer).

    Example:
        >>> m = VideoViT("tiny", depth=2, num_frames=4, img_size=32, patch_size=8, plan="hydra")
        >>> tuple(m.forward_features(torch.randn(1, 3, 4, 32, 32)).shape)
        (1, 192, 2, 4, 4)
    """

    def __init__(
        self,
        size: Optional[Literal["tiny", "small", "base", "large"]] = "base",
        *,
        embed_dim: Optional[int] = None,
        depth: Optional[int] = None,
        num_heads: Optional[int] = None,
        patch_size: int = 16,
        tubelet_size: int = 2,
        num_frames: int = 16,
        img_size: int = 224,
        in_chans: int = 3,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        init_values: Optional[float] = None,
        layout: Literal["joint", "divided"] = "joint",
        plan: PlanLike = "msa",
        drop_path_rate: float = 0.0,
        grad_checkpointing: bool = False,
        pretrained_image: Optional[str] = None,
    ) -> None:
        super().__init__()
        dims = vit_dims(size, embed_dim, depth, num_heads, "VideoViT")
        if layout not in ("joint", "divided"):
            raise ValueError(f"VideoViT: layout must be 'joint' or 'divided', got {layout!r}")
        D, depth_ = dims["embed_dim"], dims["depth"]
        self.embed_dim = self.num_features = D
        self.patch_size, self.tubelet_size, self.in_chans = patch_size, tubelet_size, in_chans
        self.layout = layout
        self.pos_grid = (max(num_frames // tubelet_size, 1), img_size // patch_size, img_size // patch_size)
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv3d(in_chans, D, (tubelet_size, patch_size, patch_size),
                                          stride=(tubelet_size, patch_size, patch_size))
        self.pos_embed = nn.Parameter(torch.zeros(1, math.prod(self.pos_grid), D))
        trunc_normal_(self.pos_embed, std=0.02)
        dpr = [drop_path_rate * i / max(depth_ - 1, 1) for i in range(depth_)]  # no tensor: works on meta
        # the plan is resolved once, here, and each block's attention built from it: local mixing runs
        # over the grid each attention sees, (t, h, w) joint, (h, w) spatial and (t,) temporal divided
        resolved_plan = AttentionPlan.coerce(plan)
        block_attention = self._refuse_windows(resolved_plan.per_block(depth_))
        spatial_dims = 2 if layout == "divided" else 3
        blocks = [PlannedBlock(D, dims["num_heads"], mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, init_values=init_values,
                               drop_path=dpr[i], attn_layer=attention_layer(attention, spatial_dims, i))
                  for i, attention in enumerate(block_attention)]
        for blk in blocks:
            blk.apply(self._init_linear)
        if layout == "divided":
            blocks = [DividedSpaceTimeBlock(b, dpr[i], block_attention[i], i) for i, b in enumerate(blocks)]
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(D, eps=1e-6)
        self.grad_checkpointing = grad_checkpointing
        self.plan, self.block_attention = resolved_plan, block_attention
        if pretrained_image:
            self.load_image_pretrained(pretrained_image)

    def group_matcher(self, coarse: bool = False) -> dict:
        """Parameter groups for timm's layer-wise lr decay (embedding, blocks, final norm)."""
        return dict(stem=r"^pos_embed|^patch_embed", blocks=[(r"^blocks\.(\d+)", None), (r"^norm", (99999,))])

    def no_weight_decay(self) -> set[str]:
        return {"pos_embed"}

    @staticmethod
    def _init_linear(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    @staticmethod
    def _refuse_windows(block_attention: list[BlockAttention]) -> list[BlockAttention]:
        if any(block.kind == "window" for block in block_attention):
            raise ValueError("VideoViT: window attention is not supported for video; use msa / hydra / none / linear")
        return block_attention

    def set_plan(self, plan: PlanLike) -> None:
        """Switch to another plan, keeping weights; window attention is rejected."""
        resolved_plan = AttentionPlan.coerce(plan)
        self.block_attention = self._refuse_windows(resolved_plan.per_block(len(self.blocks)))
        self.plan = resolved_plan
        # local mixing runs over the grid each attention sees: (t, h, w) joint, (h, w) / (t,) divided
        slots = [[(blk.block, "attn", 2), (blk, "temporal_attn", 1)] if isinstance(blk, DividedSpaceTimeBlock)
                 else [(blk, "attn", 3)] for blk in self.blocks]
        apply_plan(self.block_attention, slots)

    def grid_size(self, frames: int, height: int, width: int) -> tuple[int, int, int]:
        """Token grid ``(t, h, w)`` for a clip (after padding)."""
        return (math.ceil(frames / self.tubelet_size), math.ceil(height / self.patch_size),
                math.ceil(width / self.patch_size))

    def num_tokens(self, frames: int, height: int, width: int) -> int:
        return math.prod(self.grid_size(frames, height, width))

    def _embed(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int, int]]:
        if x.dim() != 5 or x.shape[1] != self.in_chans:
            raise ValueError(f"VideoViT: expected clips of shape (B, {self.in_chans}, T, H, W), got {tuple(x.shape)}")
        _, _, T, H, W = x.shape
        t, h, w = self.grid_size(T, H, W)
        x = F.pad(x, (0, w * self.patch_size - W, 0, h * self.patch_size - H, 0, t * self.tubelet_size - T))
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)  # (B, t*h*w, D)
        pos = self.pos_embed
        if (t, h, w) != self.pos_grid:
            pos = pos.reshape(1, *self.pos_grid, -1).permute(0, 4, 1, 2, 3).float()
            pos = F.interpolate(pos, size=(t, h, w), mode="trilinear", align_corners=False)
            pos = pos.permute(0, 2, 3, 4, 1).reshape(1, t * h * w, -1).to(x.dtype)
        return x + pos, (t, h, w)

    def forward_tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int, int]]:
        """Clips -> normed tokens ``(B, t*h*w, D)`` and the grid ``(t, h, w)``."""
        tokens, grid = self._embed(x)
        layout = TokenLayout(grid, 0)
        for blk in self.blocks:
            if self.grad_checkpointing and self.training and torch.is_grad_enabled():
                tokens = checkpoint(blk, tokens, layout, use_reentrant=False)
            else:
                tokens = blk(tokens, layout)
        return self.norm(tokens), grid

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Clips ``(B, C, T, H, W)`` -> map ``(B, D, t, h, w)``."""
        tokens, (t, h, w) = self.forward_tokens(x)
        return tokens.transpose(1, 2).reshape(x.shape[0], -1, t, h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Clips ``(B, C, T, H, W)`` -> pooled features ``(B, D)``."""
        return self.forward_tokens(x)[0].mean(dim=1)

    def load_image_pretrained(self, source: Union[str, dict], verbose: bool = True):
        """Inflate a timm-format image-ViT checkpoint into this video ViT (see class doc)."""
        sd = read_state_dict(source) if not isinstance(source, dict) else dict(source)
        out, notes = {}, []
        w = sd.get("patch_embed.proj.weight")
        if w is not None:
            if w.shape[-1] != self.patch_size:
                w = resample_patch_embed(w.float(), [self.patch_size, self.patch_size])
            out["patch_embed.proj.weight"] = w.unsqueeze(2).repeat(1, 1, self.tubelet_size, 1, 1) / self.tubelet_size
            notes.append(f"patch kernel inflated over {self.tubelet_size} frames")
        if "patch_embed.proj.bias" in sd:
            out["patch_embed.proj.bias"] = sd["patch_embed.proj.bias"]
        if "pos_embed" in sd:
            pe = sd["pos_embed"]
            grid = pe[:, _split_prefix(pe.shape[1]):]
            n = math.isqrt(grid.shape[1])
            t0, h0, w0 = self.pos_grid
            grid = grid.reshape(1, n, n, -1).permute(0, 3, 1, 2).float()
            grid = F.interpolate(grid, size=(h0, w0), mode="bicubic", align_corners=False)
            grid = grid.permute(0, 2, 3, 1).unsqueeze(1).expand(1, t0, h0, w0, -1)
            out["pos_embed"] = grid.reshape(1, t0 * h0 * w0, -1).to(pe.dtype)
            notes.append(f"pos_embed {n}x{n} -> {t0}x{h0}x{w0}")
        for key, val in sd.items():
            if key.startswith("blocks."):
                if self.layout == "divided":
                    i, rest = key[len("blocks."):].split(".", 1)
                    out[f"blocks.{i}.block.{rest}"] = val
                    if rest.startswith("attn."):
                        out[f"blocks.{i}.temporal_attn.{rest[5:]}"] = val
                    if rest.startswith("norm1."):
                        out[f"blocks.{i}.temporal_norm.{rest[6:]}"] = val
                else:
                    out[key] = val
            elif key.startswith("norm."):
                out[key] = val
        result = self.load_state_dict(out, strict=False)
        report = LoadReport(str(source) if not isinstance(source, dict) else "<state dict>",
                            list(result.missing_keys), list(result.unexpected_keys), notes)
        if verbose:
            print(report)
        return report
