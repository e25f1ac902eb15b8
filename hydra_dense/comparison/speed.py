"""Speed of the trained recipes, interleaved in one process: at the data's evaluation size and at a
big input (where attention's cost shows), with the FLOP-ideal ratio next to each measured one."""
from __future__ import annotations

from typing import Optional

import torch

from ..bench.cpu_share import cpu_share
from ..bench.flops import count_flops
from ..bench.input_sizes import parse_size
from ..bench.timing import interleaved_medians

__all__ = ["measure_speed"]


def _detector_transform(model) -> Optional[torch.nn.Module]:
    """The detector's own resize/normalise transform (torchvision R-CNNs), or None for other tasks."""
    return getattr(getattr(model, "detector", None), "transform", None)


def measure_speed(models: dict, dm, speed_size: str, speed_batch: int, repeats: int) -> tuple[dict, str, str]:
    """``models``: recipe -> trained model (the first is the reference). Returns per recipe
    ``{infer_img_s, speedup, flop_ideal}`` at the evaluation size and ``{infer_img_s_big, speedup_big,
    flop_ideal_big}`` at ``speed_size``, and the two input sizes as text. On the CPU, a timing the
    machine disturbed (another job took part of the cores) marks every recipe's ``speed_note``."""
    dm.setup("validate")
    batch = next(iter(dm.val_dataloader()))
    first = next(iter(models.values()))
    device = first.device
    images = (first.images_of(batch) if isinstance(batch, dict) else batch[0])[:speed_batch]
    images = [im.to(device) for im in images] if isinstance(images, list) else images.to(device)
    out: dict[str, dict] = {name: {} for name in models}
    ref = next(iter(models))
    with torch.inference_mode(), cpu_share(device) as share:
        t = interleaved_medians({n: (lambda m=m: m(images)) for n, m in models.items()}, warmup=1, repeats=repeats)
    with torch.inference_mode():
        flops = {n: count_flops(lambda m=m: m(images)) for n, m in models.items()}
    for name in models:
        out[name].update(infer_img_s=len(images) / t[name], speedup=t[ref] / t[name], flop_ideal=flops[ref] / flops[name])
    small = f"batch {len(images)}, {'x'.join(map(str, images[0].shape[1:]))}"
    transform = _detector_transform(first)
    if transform is not None and transform.resize_eval:  # the detector runs on its own resize, not the input
        small += f", resized by the detector to short side {max(transform.min_size)}"
    big: Optional[torch.Tensor] = None
    if str(speed_size) not in ("0", ""):
        if images[0].dim() == 4:  # clips
            size = parse_size(speed_size if str(speed_size).count("x") == 2 else "32x224x224")
            big = torch.randn(1, 3, size.frames, size.height, size.width, device=device)
        else:
            size = parse_size(str(speed_size))
            big = torch.randn(1, 3, size.height, size.width, device=device)
        for m in models.values():  # detectors: time the big input at its size, not resized to the eval size
            transform = _detector_transform(m)
            if transform is not None:
                transform.resize_eval = False
        with torch.inference_mode(), cpu_share(device) as share_big:
            t = interleaved_medians({n: (lambda m=m: m(big)) for n, m in models.items()}, warmup=1,
                                    repeats=max(2, repeats // 2))
        with torch.inference_mode():
            flops = {n: count_flops(lambda m=m: m(big)) for n, m in models.items()}
        if share_big.busy and not share.busy:
            share = share_big
        for name in models:
            out[name].update(infer_img_s_big=1 / t[name], speedup_big=t[ref] / t[name],
                             flop_ideal_big=flops[ref] / flops[name])
    for name in models:
        out[name]["speed_note"] = share.note()
    return out, small, "x".join(map(str, big.shape[2:])) if big is not None else ""
