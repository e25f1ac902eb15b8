"""torchvision detectors (Mask R-CNN, Faster R-CNN, RetinaNet, FCOS) on a ViT + simple pyramid.

torchvision's detectors normalise, resize and pad a batch in their ``transform`` and then call
``backbone(images.tensors)``: the backbone never learns which pixels are padding. Here the
transform is :class:`PaddingAwareTransform`, which hands the per-image valid sizes to the
backbone (:class:`PaddedPyramidBackbone`) so that Hydra / MSA blocks get a ``key_padding_mask``
and an image padded inside a batch gives the same detections as the image alone.
"""
from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any, Literal, Optional, Sequence

import torch
from torch import nn
from torchvision.models.detection import FCOS, FasterRCNN, MaskRCNN, RetinaNet
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.models.detection.transform import GeneralizedRCNNTransform
from torchvision.ops import MultiScaleRoIAlign

from ..backbones.pyramid import ViTWithPyramid
from ..data.normalisation import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["DETECTORS", "PaddedPyramidBackbone", "PaddingAwareTransform", "PaddingAwareRPN", "build_detector"]

DETECTORS = ("mask_rcnn", "faster_rcnn", "retinanet", "fcos")


class PaddedPyramidBackbone(ViTWithPyramid):
    """:class:`ViTWithPyramid` that takes the batch's valid image sizes from the transform.

    ``set_image_sizes(sizes)`` is called by :class:`PaddingAwareTransform` right before the
    detector calls ``forward(x)``; the pixel padding mask ``(B, H, W)`` is built from them and used
    once. Without sizes (called directly) nothing is masked.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._image_sizes: Optional[list[tuple[int, int]]] = None

    def set_image_sizes(self, sizes: Optional[Sequence[tuple[int, int]]]) -> None:
        self._image_sizes = [tuple(map(int, s)) for s in sizes] if sizes is not None else None

    def forward(self, x: torch.Tensor, pad_mask: Optional[torch.Tensor] = None) -> "OrderedDict[str, torch.Tensor]":
        sizes, self._image_sizes = self._image_sizes, None
        if pad_mask is None and sizes is not None and len(sizes) == x.shape[0]:
            B, _, H, W = x.shape
            if any((h, w) != (H, W) for h, w in sizes):
                pad_mask = torch.ones(B, H, W, dtype=torch.bool, device=x.device)
                for i, (h, w) in enumerate(sizes):
                    pad_mask[i, :h, :w] = False
        return super().forward(x, pad_mask)


class PaddingAwareTransform(GeneralizedRCNNTransform):
    """torchvision's detection transform that (1) tells the backbone each image's valid size and
    (2) resizes only where asked: ``resize_train`` (False when the data module already resized,
    e.g. large-scale jitter) and ``resize_eval`` (shortest side ``min_size``, longest at most
    ``max_size``; False keeps evaluation images at their size)."""

    def __init__(self, min_size: int, max_size: int, image_mean: Sequence[float], image_std: Sequence[float],
                 size_divisible: int = 32, resize_train: bool = False, resize_eval: bool = True) -> None:
        super().__init__(min_size, max_size, list(image_mean), list(image_std), size_divisible)
        self.resize_train, self.resize_eval = resize_train, resize_eval
        self._sink: list = []  # the backbone's set_image_sizes (a list, so it is not a submodule)

    def connect(self, backbone: PaddedPyramidBackbone) -> None:
        self._sink[:] = [backbone.set_image_sizes]

    def resize(self, image, target=None):
        if (self.training and not self.resize_train) or (not self.training and not self.resize_eval):
            return image, target
        return super().resize(image, target)

    def forward(self, images, targets=None):
        image_list, targets = super().forward(images, targets)
        for sink in self._sink:
            sink(image_list.image_sizes)
        return image_list, targets


class PaddingAwareRPN(RegionProposalNetwork):
    """torchvision's RPN, but proposals centred outside an image's valid area are dropped before
    ranking (torchvision would clip them onto the border, and the batch's padding would decide
    how many of them compete with the real ones)."""

    def filter_proposals(self, proposals, objectness, image_shapes, num_anchors_per_level):
        B = len(image_shapes)
        boxes = proposals.detach().view(B, -1, 4)
        cx, cy = (boxes[..., 0] + boxes[..., 2]) / 2, (boxes[..., 1] + boxes[..., 3]) / 2
        hw = torch.tensor(image_shapes, device=boxes.device, dtype=boxes.dtype)
        outside = (cx < 0) | (cy < 0) | (cx > hw[:, 1:2]) | (cy > hw[:, 0:1])
        objectness = objectness.reshape(B, -1).masked_fill(outside, float("-inf")).reshape(-1, 1)
        final_boxes, final_scores = super().filter_proposals(proposals, objectness, image_shapes,
                                                             num_anchors_per_level)
        keep = [s > 0 for s in final_scores]  # sigmoid(-inf) = 0: the dropped ones
        return [b[k] for b, k in zip(final_boxes, keep)], [s[k] for s, k in zip(final_scores, keep)]


def _padding_aware_rpn(rpn: RegionProposalNetwork, **settings: Any) -> PaddingAwareRPN:
    """A :class:`PaddingAwareRPN` with ``rpn``'s anchor generator and head (so the same state dict
    keys) and FasterRCNN's own ``rpn_*`` defaults, read from its signature, overridden by
    ``settings`` (the ``rpn_*`` arguments this module passes to FasterRCNN)."""
    s = {k: p.default for k, p in inspect.signature(FasterRCNN.__init__).parameters.items() if k.startswith("rpn_")}
    s.update(settings)
    return PaddingAwareRPN(
        rpn.anchor_generator, rpn.head, fg_iou_thresh=s["rpn_fg_iou_thresh"], bg_iou_thresh=s["rpn_bg_iou_thresh"],
        batch_size_per_image=s["rpn_batch_size_per_image"], positive_fraction=s["rpn_positive_fraction"],
        pre_nms_top_n=dict(training=s["rpn_pre_nms_top_n_train"], testing=s["rpn_pre_nms_top_n_test"]),
        post_nms_top_n=dict(training=s["rpn_post_nms_top_n_train"], testing=s["rpn_post_nms_top_n_test"]),
        nms_thresh=s["rpn_nms_thresh"], score_thresh=s["rpn_score_thresh"])


def _anchor_generator(sizes: Sequence[int], ratios: Sequence[float], octaves: int) -> AnchorGenerator:
    per_level = tuple(tuple(int(round(s * 2 ** (i / octaves))) for i in range(octaves)) for s in sizes)
    return AnchorGenerator(per_level, (tuple(ratios),) * len(sizes))


def build_detector(
    kind: Literal["mask_rcnn", "faster_rcnn", "retinanet", "fcos"],
    backbone: PaddedPyramidBackbone,
    num_classes: int,
    anchor_sizes: Optional[Sequence[int]] = None,
    aspect_ratios: Sequence[float] = (0.5, 1.0, 2.0),
    min_size: int = 1024,
    max_size: int = 1024,
    image_mean: Sequence[float] = IMAGENET_MEAN,
    image_std: Sequence[float] = IMAGENET_STD,
    resize_train: bool = False,
    resize_eval: bool = True,
    detections_per_img: int = 100,
    score_thresh: float = 0.05,
    box_batch_size_per_image: int = 512,
    rpn_batch_size_per_image: int = 256,
) -> nn.Module:
    """A torchvision detector over ``backbone``'s pyramid levels.

    ``num_classes`` excludes background (labels are 1..K). ``anchor_sizes``: one base size per
    pyramid level; RetinaNet adds 3 octave scales per level. R-CNN RoI pooling
    uses every level but the extra top one (``p6``), as in ViTDet.
    Default anchors: 8x each level's stride (32 … 512 for strides 4 … 64, as detectron2).
    """
    if kind not in DETECTORS:
        raise ValueError(f"model.detector: unknown detector {kind!r}; choose from {', '.join(DETECTORS)}")
    levels = list(backbone.pyramid.strides)
    sizes = list(anchor_sizes) if anchor_sizes else [int(8 * s) for s in backbone.pyramid.strides.values()]
    if len(sizes) != len(levels):
        raise ValueError(f"model.anchor_sizes: {len(sizes)} sizes for {len(levels)} pyramid levels {levels}")
    K = num_classes + 1  # torchvision counts the background class
    if kind in ("mask_rcnn", "faster_rcnn"):
        roi_levels = levels[:-1] if backbone.pyramid.top_block else levels  # p6 is for the RPN only
        common = dict(
            rpn_anchor_generator=_anchor_generator(sizes, aspect_ratios, 1),
            box_roi_pool=MultiScaleRoIAlign(roi_levels, 7, 2), box_detections_per_img=detections_per_img,
            box_score_thresh=score_thresh, box_batch_size_per_image=box_batch_size_per_image,
            rpn_batch_size_per_image=rpn_batch_size_per_image, min_size=min_size, max_size=max_size)
        if kind == "mask_rcnn":
            model = MaskRCNN(backbone, K, mask_roi_pool=MultiScaleRoIAlign(roi_levels, 14, 2), **common)
        else:
            model = FasterRCNN(backbone, K, **common)
        model.rpn = _padding_aware_rpn(model.rpn, rpn_batch_size_per_image=rpn_batch_size_per_image)
    elif kind == "retinanet":
        model = RetinaNet(backbone, K, anchor_generator=_anchor_generator(sizes, aspect_ratios, 3),
                          detections_per_img=detections_per_img, score_thresh=score_thresh, min_size=min_size,
                          max_size=max_size)
    else:
        model = FCOS(backbone, K, anchor_generator=AnchorGenerator(tuple((s,) for s in sizes), ((1.0,),) * len(sizes)),
                     detections_per_img=detections_per_img, score_thresh=score_thresh, min_size=min_size,
                     max_size=max_size)
    transform = PaddingAwareTransform(min_size, max_size, image_mean, image_std,
                                      size_divisible=max(32, int(max(backbone.pyramid.strides.values()))),
                                      resize_train=resize_train, resize_eval=resize_eval)
    transform.connect(backbone)
    model.transform = transform
    return model
