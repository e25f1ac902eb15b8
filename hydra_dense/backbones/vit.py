"""Plain image ViT with a per-block attention plan, returning dense feature maps.

Built on timm's :class:`~timm.models.vision_transformer.VisionTransformer`: same parameter
names (a timm / DeiT / MAE / DINOv2 state dict loads directly), timm's patch embedding and
pos-embed resampling. Only each block's attention module is swapped according to the plan.
"""
from __future__ import annotations

from typing import Any, Literal, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer
from torch.utils.checkpoint import checkpoint

from ..attention import AttentionPlan, MSAttention, TokenLayout
from .blocks import PlannedBackbone, apply_plan, planned_block_builder
from ..checkpoints.pretrained import load_pretrained
from .sizes import VIT_SIZES, vit_dims

__all__ = ["ViT", "VIT_SIZES", "PlanLike"]

# a mapping before the dataclass: jsonargparse then replaces a plan given over another instead of
# merging it key by key (a second backbone file would keep the first one's local branch)
PlanLike = Union[str, list, dict, AttentionPlan]


class ViT(PlannedBackbone, VisionTransformer):
    """Image ViT backbone for dense tasks: ``(B, C, H, W)`` -> list of ``(B, D, h, w)`` maps.

    Any input size is accepted: the image is zero-padded on the right/bottom to a multiple of
    ``patch_size`` (so ``h = ceil(H / p)``, ``w = ceil(W / p)``) and the position embeddings
    (learned at ``img_size``) are resampled to the input grid.

    Args:
        size: ``tiny`` / ``small`` / ``base`` / ``large`` presets (ViT-Ti/S/B/L); ``embed_dim``,
            ``depth``, ``num_heads`` override them for custom sizes.
        patch_size: patch side in pixels (any value, e.g. 16 or 14).
        img_size: the grid the position embeddings are stored at (the pretraining size).
        plan: the attention plan (:class:`~hydra_dense.attention.AttentionPlan`, a kind name
            such as ``"hydra"``, or a per-block list).
        out_indices: blocks whose outputs are returned (negative counts from the end).
        out_norm: apply the final LayerNorm to every returned map (timm's ``norm=True``).
        init_values: LayerScale init (DINOv2 uses 1e-5); None disables LayerScale.
        class_token / reg_tokens: prefix tokens (dropped from the returned maps).
        grad_checkpointing: recompute blocks in backward to save memory.
        pos_embed_antialias: antialias when downsampling position embeddings (timm's default
            is True; DINOv2 itself resamples without).
        pretrained: optional path of a timm-format state dict (see :mod:`.checkpoint`).

    Example:
        >>> m = ViT("tiny", depth=2, plan="hydra", out_indices=[0, 1])
        >>> [tuple(f.shape) for f in m(torch.randn(1, 3, 50, 70))]
        [(1, 192, 4, 5), (1, 192, 4, 5)]
    """

    def __init__(
        self,
        size: Optional[Literal["tiny", "small", "base", "large"]] = "base",
        *,
        embed_dim: Optional[int] = None,
        depth: Optional[int] = None,
        num_heads: Optional[int] = None,
        patch_size: int = 16,
        img_size: int = 224,
        in_chans: int = 3,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        qk_norm: bool = False,
        init_values: Optional[float] = None,
        class_token: bool = True,
        reg_tokens: int = 0,
        drop_path_rate: float = 0.0,
        plan: PlanLike = "msa",
        out_indices: Sequence[int] = (-1,),
        out_norm: bool = True,
        grad_checkpointing: bool = False,
        pos_embed_antialias: bool = True,
        pretrained: Optional[str] = None,
        pretrained_strict: bool = False,
    ) -> None:
        dims = vit_dims(size, embed_dim, depth, num_heads, "ViT")
        # the plan is resolved once, here; timm builds each block's attention from that list
        resolved_plan = AttentionPlan.coerce(plan)
        block_attention = resolved_plan.per_block(dims["depth"])
        super().__init__(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, num_classes=0, global_pool="",
            mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, qk_norm=qk_norm, init_values=init_values,
            class_token=class_token, reg_tokens=reg_tokens, drop_path_rate=drop_path_rate,
            dynamic_img_size=True, dynamic_img_pad=True, block_fn=planned_block_builder(block_attention),
            attn_layer=MSAttention,
            **dims,
        )
        self.patch_size = patch_size
        self.in_chans = in_chans
        self.pos_embed_antialias = pos_embed_antialias
        self.out_norm = out_norm
        if not out_norm:
            # kept for checkpoint compatibility (MAE / timm weights have it) but frozen: a trainable
            # parameter that never gets a gradient breaks DDP with find_unused_parameters=False
            self.norm.requires_grad_(False)
        depth_ = dims["depth"]
        for i in out_indices:
            if not -depth_ <= i < depth_:
                raise ValueError(f"ViT: out_indices entry {i} is out of range for depth {depth_}")
        self.out_indices = [i % depth_ for i in out_indices]
        # what forward returns, one entry per map (timm's feature_info of a features_only model)
        self.feature_info = [dict(num_chs=self.embed_dim, reduction=patch_size, module=f"blocks.{i}")
                             for i in self.out_indices]
        self.plan, self.block_attention = resolved_plan, block_attention
        self.set_grad_checkpointing(grad_checkpointing)
        if pretrained:
            load_pretrained(self, pretrained, strict=pretrained_strict)

    # ---- plan ------------------------------------------------------------------------------
    def set_plan(self, plan: PlanLike) -> None:
        """Switch to another plan: blocks whose attention changes get a new module holding the qkv /
        proj weights; the others keep theirs."""
        self.plan = AttentionPlan.coerce(plan)
        self.block_attention = self.plan.per_block(len(self.blocks))
        apply_plan(self.block_attention, [[(blk, "attn", 2)] for blk in self.blocks])

    # ---- dense interface -------------------------------------------------------------------
    @property
    def out_channels(self) -> int:
        """Channels of each returned map (torchvision's backbone contract)."""
        return self.embed_dim

    def grid_size(self, height: int, width: int) -> tuple[int, int]:
        """Patch grid for an input of ``height`` x ``width`` pixels (after padding)."""
        p = self.patch_size  # integer ceil division: a symbolic size in an export stays an integer expression
        return (height + p - 1) // p, (width + p - 1) // p

    def _resampled_pos(self, h: int, w: int) -> torch.Tensor:
        """Position embeddings ``(1, P' + h*w, D)`` for an ``h`` x ``w`` grid (P' prefix rows)."""
        if (h, w) == tuple(self.patch_embed.grid_size) and not torch.compiler.is_exporting():
            return self.pos_embed  # (an export traces the resampling: its grid may be symbolic)
        P = 0 if self.no_embed_class else self.num_prefix_tokens
        return resample_abs_pos_embed(self.pos_embed, new_size=(h, w), old_size=self.patch_embed.grid_size,
                                      num_prefix_tokens=P, antialias=self.pos_embed_antialias)

    def traced_padded_positions(self, valid: torch.Tensor) -> torch.Tensor:
        """Per-image position embeddings ``(B, P' + h*w, D)`` for a token grid ``valid`` ``(B, h, w)``
        (True = a real token, the valid part top-left), computed from the mask's *values* with
        fixed shapes, so that ``torch.export`` can trace it (the eager path resamples each image to
        its own grid size, which is a shape that depends on the data).

        Bicubic ``grid_sample`` at the source coordinates ``F.interpolate`` uses (``align_corners``
        False, border taps clamped) gives timm's resampling without antialiasing; padded tokens get
        zeros, as in the eager path.
        """
        if self.pos_embed_antialias:
            raise ValueError("ViT: a padding mask in an exported graph needs pos_embed_antialias: false (the traced "
                             "per-image resampling is grid_sample, which has no antialiasing); set it in the "
                             "backbone config, or export without a padding mask")
        B, h, w = valid.shape
        P = 0 if self.no_embed_class else self.num_prefix_tokens
        H0, W0 = self.patch_embed.grid_size
        D = self.pos_embed.shape[-1]
        rows = valid.any(2).sum(1).clamp_min(1).to(self.pos_embed.dtype)  # (B,) valid grid height
        cols = valid.any(1).sum(1).clamp_min(1).to(self.pos_embed.dtype)
        ys = (torch.arange(h, device=valid.device, dtype=rows.dtype) + 0.5) / rows[:, None] * 2 - 1  # (B, h)
        xs = (torch.arange(w, device=valid.device, dtype=cols.dtype) + 0.5) / cols[:, None] * 2 - 1  # (B, w)
        grid = torch.stack([xs[:, None, :].expand(B, h, w), ys[:, :, None].expand(B, h, w)], dim=-1)
        source = self.pos_embed[:, P:].reshape(1, H0, W0, D).permute(0, 3, 1, 2).expand(B, D, H0, W0)
        pos = F.grid_sample(source, grid, mode="bicubic", padding_mode="border", align_corners=False)
        inside = (torch.arange(h, device=valid.device)[None, :, None] < rows[:, None, None]) & \
                 (torch.arange(w, device=valid.device)[None, None, :] < cols[:, None, None])  # (B, h, w)
        pos = pos.permute(0, 2, 3, 1) * inside[..., None].to(pos.dtype)
        return torch.cat([self.pos_embed[:, :P].expand(B, P, D), pos.reshape(B, h * w, D)], dim=1)

    def _positions(self, h: int, w: int, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Position embeddings ``(1 or B, P' + h*w, D)`` for an ``h`` x ``w`` token grid.

        ``valid``: optional ``(B, h, w)``, True = a real (unpadded) token. Each image then gets
        positions resampled to its own valid grid, placed top-left, so padding an image inside a
        batch changes none of its tokens (under export: :meth:`traced_padded_positions`).
        """
        if valid is None:
            return self._resampled_pos(h, w)
        if torch.compiler.is_exporting():  # sizes from values are not traceable: the same positions, traced
            return self.traced_padded_positions(valid)
        valid_hw = [(max(int(r.sum()), 1), max(int(c.sum()), 1))
                    for r, c in zip(valid.any(2).unbind(0), valid.any(1).unbind(0))]
        if all(hw == (h, w) for hw in valid_hw):
            return self._resampled_pos(h, w)
        P = 0 if self.no_embed_class else self.num_prefix_tokens
        D = self.pos_embed.shape[-1]
        grids = []
        for vh, vw in valid_hw:
            p = self._resampled_pos(vh, vw)
            g = p[:, P:].reshape(1, vh, vw, D)
            g = F.pad(g, (0, 0, 0, w - vw, 0, h - vh))
            grids.append(torch.cat([p[:, :P], g.reshape(1, h * w, D)], dim=1))
        return torch.cat(grids, dim=0)

    def _pos_embed(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``(B, h, w, D)`` patch tokens + positions ``(1 or B, P' + h*w, D)`` -> ``(B, P + h*w, D)``
        with prefix tokens."""
        B, h, w, D = x.shape
        x = x.reshape(B, h * w, D)
        prefix = []
        if self.cls_token is not None:
            prefix.append(self.cls_token.expand(B, -1, -1))
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(B, -1, -1))
        if self.no_embed_class:
            x = torch.cat(prefix + [x + pos], dim=1)
        else:
            x = torch.cat(prefix + [x], dim=1) + pos
        return self.pos_drop(x)

    def token_padding_mask(self, pad_mask: torch.Tensor) -> torch.Tensor:
        """Pixel padding ``(B, H, W)`` (True = padded) -> token padding ``(B, h*w)``.

        A token is padding only if every pixel under it is padding (the right/bottom pad to a
        patch multiple counts as padding too). Padding is expected on the right and bottom
        (how detection and segmentation batches are padded).
        """
        B, H, W = pad_mask.shape
        h, w = self.grid_size(H, W)
        m = F.pad(pad_mask, (0, w * self.patch_size - W, 0, h * self.patch_size - H), value=True)
        valid = F.max_pool2d((~m).float().unsqueeze(1), self.patch_size).squeeze(1) > 0
        return (~valid).reshape(B, h * w)

    def forward_tokens(
        self, x: torch.Tensor, pad_mask: Optional[torch.Tensor] = None, stop_at: Optional[int] = None
    ) -> tuple[list[torch.Tensor], TokenLayout]:
        """Run the blocks; return the token sequences ``(B, P + h*w, D)`` after each block up to
        ``stop_at`` (inclusive, default: the last) and the layout."""
        if x.dim() != 4 or x.shape[1] != self.in_chans:
            raise ValueError(f"ViT: expected images of shape (B, {self.in_chans}, H, W), got {tuple(x.shape)}")
        B, _, H, W = x.shape
        if pad_mask is not None and (pad_mask.dtype != torch.bool or tuple(pad_mask.shape) != (B, H, W)):
            raise ValueError(f"ViT: pad_mask must be bool of shape {(B, H, W)}, got {pad_mask.dtype} {tuple(pad_mask.shape)}")
        tokens = self.patch_embed(x)  # (B, h, w, D)
        h, w = tokens.shape[1:3]
        kpm, valid = None, None
        if pad_mask is not None:
            grid_mask = self.token_padding_mask(pad_mask)
            valid = ~grid_mask.reshape(B, h, w)
            kpm = torch.cat([grid_mask.new_zeros(B, self.num_prefix_tokens), grid_mask], dim=1)
        tokens = self.norm_pre(self.patch_drop(self._pos_embed(tokens, self._positions(h, w, valid))))
        layout = TokenLayout((h, w), self.num_prefix_tokens, kpm)
        last = len(self.blocks) - 1 if stop_at is None else stop_at
        outs = []
        for i, blk in enumerate(self.blocks[: last + 1]):
            if self.grad_checkpointing and self.training and torch.is_grad_enabled():
                tokens = checkpoint(blk, tokens, layout, use_reentrant=False)
            else:
                tokens = blk(tokens, layout)
            outs.append(tokens)
        return outs, layout

    def forward(self, x: torch.Tensor, pad_mask: Optional[torch.Tensor] = None) -> list[torch.Tensor]:  # type: ignore[override]
        """Images ``(B, C, H, W)`` (optional pixel ``pad_mask`` ``(B, H, W)``, True = padding)
        -> one ``(B, D, ceil(H/p), ceil(W/p))`` map per entry of ``out_indices``."""
        outs, layout = self.forward_tokens(x, pad_mask, stop_at=max(self.out_indices))
        B = x.shape[0]
        h, w = layout.grid
        maps = []
        for i in self.out_indices:
            t = self.norm(outs[i]) if self.out_norm else outs[i]
            maps.append(t[:, layout.num_prefix_tokens:].transpose(1, 2).reshape(B, -1, h, w))
        return maps

    # ---- timm's feature API (timm's signatures), with the plan, layout and padding honoured -------
    @staticmethod
    def _no_timm_mask(attn_mask: Optional[torch.Tensor], is_causal: bool) -> None:
        if attn_mask is not None or is_causal:
            raise ValueError("ViT: planned attention (Hydra, windows, local mixing) takes no attn_mask / is_causal; "
                             "image padding goes in as pad_mask (B, H, W)")

    def forward_features(self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None, is_causal: bool = False,
                         *, pad_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Images -> final-normed tokens ``(B, P + h*w, D)`` (timm's ``forward_features``)."""
        self._no_timm_mask(attn_mask, is_causal)
        outs, _ = self.forward_tokens(x, pad_mask)
        return self.norm(outs[-1])

    def _take_indices(self, indices: Optional[Union[int, list[int]]]) -> list[int]:
        """Blocks to return: the last ``n`` for an int, all for None, else those (negative from the end)."""
        depth = len(self.blocks)
        if indices is None:
            return list(range(depth))
        if isinstance(indices, int):
            if not 0 < indices <= depth:
                raise ValueError(f"ViT.forward_intermediates: indices={indices} must be in 1..{depth} blocks")
            return list(range(depth - indices, depth))
        out = [i % depth if -depth <= i < depth else None for i in indices]
        if None in out or not out:
            raise ValueError(f"ViT.forward_intermediates: indices {list(indices)} out of range for depth {depth}")
        return out

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: Optional[Union[int, list[int]]] = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
        output_dict: bool = False,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
        *,
        pad_mask: Optional[torch.Tensor] = None,
    ) -> Union[list[Any], tuple[torch.Tensor, list[Any]], dict[str, Any]]:
        """timm's ``forward_intermediates`` (same arguments and returns, so timm's own callers such as
        ``get_intermediate_layers`` work), run through this model's blocks with their token layout,
        so window plans, local mixing and ``pad_mask`` apply.

        ``indices``: the last n blocks if an int, all if None, else those blocks. Maps are
        ``(B, D, h, w)`` (``NCHW``) or ``(B, h*w, D)`` (``NLC``).
        """
        self._no_timm_mask(attn_mask, is_causal)
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"ViT.forward_intermediates: output_fmt must be NCHW or NLC, got {output_fmt!r}")
        take = self._take_indices(indices)
        max_index = max(take)
        partial = stop_early or intermediates_only
        outs, layout = self.forward_tokens(x, pad_mask, stop_at=max_index if partial else None)
        P, (h, w), B = layout.num_prefix_tokens, layout.grid, x.shape[0]
        picked = [self.norm(outs[i]) if norm else outs[i] for i in take]
        prefix = [t[:, :P] for t in picked] if P else None
        maps = [t[:, P:] for t in picked]
        if output_fmt == "NCHW":
            maps = [t.transpose(1, 2).reshape(B, -1, h, w) for t in maps]
        if output_dict:
            out: dict[str, Any] = {"image_intermediates": maps}
            if prefix is not None and return_prefix_tokens:
                out["image_intermediates_prefix"] = prefix
            if not intermediates_only:
                out["image_features"] = self.norm(outs[-1])
            return out
        if return_prefix_tokens and prefix is not None:
            maps = list(zip(maps, prefix))
        if intermediates_only:
            return maps
        return self.norm(outs[-1]), maps
