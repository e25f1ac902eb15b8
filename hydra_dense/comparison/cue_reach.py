"""How far a presence-track cue travels through a trained backbone, block by block.

    python tools/cue_reach.py --run runs/context_presence_whole/msa/seed0 [--scenes 16] [--size 448]

Paired scenes of the track's validation digits are drawn alike except that one of each pair holds the
cue. For each block's output tokens ``x_b`` the table gives the relative change the cue makes,
``||x_b(with cue) - x_b(without)|| / ||x_b(without)||`` over a group of digit tokens:

- ``near`` / ``far``: digit tokens within 8 tokens of the cue, and beyond;
- ``beyond local reach``: digit tokens farther from the cue than a stack of 7x7 depthwise
  convolutions reaches after ``b + 1`` blocks (3 tokens a block). Only global mixing (attention,
  Hydra's global term, a pooled context) can change them; in a local-only model they are exactly
  unchanged, which the column shows as 0.

A model whose last block changes its far digit tokens by a small fraction cannot tell the head
which class they are: the cue did not reach them. Read it beside the run's ``digit_cued`` IoU.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from ..data.demo_context import CUE_SIDE, PATCH, SIZES, scene
from ..data.normalisation import IMAGENET_MEAN, IMAGENET_STD, normalised_tensor
from ..data.sources import digit_pools, load_mnist_5k
from ..runtime.atomic_file import atomic_write_text
from ..runtime.refusal import plain_refusals
from .saved_run import NotASavedRun, saved_run

__all__ = ["LOCAL_REACH_PER_BLOCK", "NEAR_TOKENS", "scene_pairs", "token_groups", "cue_reach", "main", "entry"]

LOCAL_REACH_PER_BLOCK = 3  # tokens a 7x7 depthwise convolution moves information per block
NEAR_TOKENS = 8  # the near / far split of comparison.near_far


def scene_pairs(count: int, size: int = SIZES["val_size"], seed: int = 1
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``count`` pairs ``(with_cue, without_cue, labels, distance)`` of presence scenes of the
    validation digits at the validation scenes' digit density: images ``(size, size, 3)`` uint8
    identical but for the cue, the label map of the scene with it and each pixel's token distance to
    the cue ``(size, size)``. The scene drawing takes the same random draws with and without the
    cue, so one generator state gives both."""
    area = (size / SIZES["val_size"]) ** 2
    objects = tuple(max(1, round(n * area)) for n in SIZES["val_objects"])
    digits, _ = load_mnist_5k()
    _train, val = digit_pools(np.random.default_rng(0), len(digits))
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        state = rng.bit_generator.state
        without, _labels, _dist = scene(rng, digits[val], "presence", size, objects, cued=False)
        rng.bit_generator.state = state
        with_cue, labels, dist = scene(rng, digits[val], "presence", size, objects, cued=True)
        pairs.append((with_cue, without, labels, dist))
    return pairs


def token_groups(labels: np.ndarray, distance: np.ndarray, patch: int = PATCH) -> tuple[np.ndarray, np.ndarray]:
    """Per token of the ``patch`` grid: whether it holds a digit pixel ``(h, w)`` bool, and its
    distance to the cue in tokens ``(h, w)`` (that of its nearest pixel)."""
    h, w = labels.shape[0] // patch, labels.shape[1] // patch
    tiles = lambda a: a[:h * patch, :w * patch].reshape(h, patch, w, patch)  # noqa: E731
    return tiles(labels).max(axis=(1, 3)) > 0, tiles(distance).min(axis=(1, 3)).astype(np.int64)


@torch.no_grad()
def cue_reach(backbone: torch.nn.Module, pairs: list, batch: int = 4, mean: Sequence[float] = IMAGENET_MEAN,
              std: Sequence[float] = IMAGENET_STD) -> list[dict]:
    """One row per block: ``block``, ``local_reach`` (tokens), and the relative change the cue makes
    at digit tokens ``near``, ``far`` and ``beyond_local_reach`` (NaN where a group is empty). Images
    are normalised with ``mean`` / ``std``, as the run's data module did."""
    backbone.eval()
    depth = len(backbone.blocks)
    sums = {k: np.zeros((depth, 2)) for k in ("near", "far", "beyond_local_reach")}  # (diff², base²)
    for start in range(0, len(pairs), batch):
        chunk = pairs[start:start + batch]
        images = torch.stack([normalised_tensor(p[i], mean, std) for i in (0, 1) for p in chunk])
        outs, layout = backbone.forward_tokens(images)
        h, w = layout.grid
        for n, (_with, _without, labels, dist) in enumerate(chunk):
            digit, token_dist = token_groups(labels, dist)
            digit, token_dist = torch.from_numpy(digit[:h, :w]).flatten(), torch.from_numpy(token_dist[:h, :w]).flatten()
            for b, tokens in enumerate(outs):
                grid = tokens[:, layout.num_prefix_tokens:]
                diff2, base2 = (grid[n] - grid[len(chunk) + n]).square().sum(-1), grid[len(chunk) + n].square().sum(-1)
                reach = LOCAL_REACH_PER_BLOCK * (b + 1)
                for key, chosen in (("near", digit & (token_dist <= NEAR_TOKENS)),
                                    ("far", digit & (token_dist > NEAR_TOKENS)),
                                    ("beyond_local_reach", digit & (token_dist > reach))):
                    sums[key][b] += (float(diff2[chosen].sum()), float(base2[chosen].sum()))
    ratio = lambda d, s: math.sqrt(d / s) if s > 0 else float("nan")  # noqa: E731
    return [dict(block=b, local_reach=LOCAL_REACH_PER_BLOCK * (b + 1),
                 **{k: ratio(*sums[k][b]) for k in sums}) for b in range(depth)]


def _table(rows: list[dict], title: str) -> str:
    fmt = lambda v: "–" if v != v else f"{100 * v:.2g}"  # noqa: E731
    lines = [title, "", "| block | local reach (tokens) | near (%) | far (%) | beyond local reach (%) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['block']} | {r['local_reach']} | {fmt(r['near'])} | {fmt(r['far'])} | "
              f"{fmt(r['beyond_local_reach'])} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a finished presence-track run folder (request.json, result.json, final_weights.pt)")
    p.add_argument("--scenes", type=int, default=16, help="scene pairs (default 16)")
    p.add_argument("--size", type=int, default=SIZES["val_size"], help="scene side in pixels (default the validation size, 448)")
    p.add_argument("--out", default=None, help="Markdown table to write (default <run>/cue_reach_<size>.md)")
    args = p.parse_args(argv)
    if args.scenes < 1:
        p.error(f"--scenes: {args.scenes} must be at least 1")
    if args.size < CUE_SIDE + PATCH or args.size % PATCH:
        p.error(f"--size: {args.size} must be a multiple of {PATCH} and larger than the cue ({CUE_SIDE} px)")
    try:
        req, _result, model, dm, _trainer = saved_run(Path(args.run), work_dir="cue_reach")
    except NotASavedRun as err:
        p.error(f"--run: {err}")
    run = Path(args.run)
    data = getattr(dm, "hparams", {})
    rows = cue_reach(model.backbone, scene_pairs(args.scenes, args.size),
                     mean=data.get("mean", IMAGENET_MEAN), std=data.get("std", IMAGENET_STD))
    text = _table(rows, f"How far the cue travels: {req.recipe} seed {req.seed}, {args.scenes} scene pairs of "
                        f"{args.size}x{args.size} (relative change of each block's digit tokens when the cue is added)")
    out = Path(args.out) if args.out else run / f"cue_reach_{args.size}.md"
    atomic_write_text(out, text)
    print(text + f"written: {out}")
    return 0


# ``tools/cue_reach.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)
