"""Detection annotations from COCO json and Pascal-VOC XML, checked and normalised once.

Both readers give the same per-image :class:`ImageRecord` (boxes ``xyxy`` in pixels, contiguous
labels ``1..K`` — 0 is the detectors' background — and the raw COCO segmentation when there is
one). Bad input stops with an error that names the file:

- boxes partly outside the image are clipped; zero-area or inverted boxes are dropped. Both are
  counted in :class:`FormatReport` and logged once per file;
- images without annotations are kept (negatives);
- an annotation naming a category or image id that does not exist, a missing key (a COCO file
  without an ``annotations`` list too), an image id used twice, a bbox / width / height that is
  not a number, malformed json or XML: :class:`AnnotationError`.
"""
from __future__ import annotations

import json
import logging
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from pycocotools import mask as mask_utils

log = logging.getLogger(__name__)

__all__ = ["AnnotationError", "FormatReport", "ImageRecord", "CocoAnnotations", "read_coco", "read_voc",
           "decode_segmentation", "clean_boxes"]


class AnnotationError(ValueError):
    """Annotations that cannot be used as given (the message names the file and the entry)."""


@dataclass
class FormatReport:
    """What the readers changed or dropped, per annotation file."""

    source: str = ""
    images: int = 0
    annotations: int = 0
    clipped: int = 0
    dropped_degenerate: int = 0
    negatives: int = 0
    crowd: int = 0

    def summary(self) -> str:
        return (f"{self.source}: {self.images} images, {self.annotations} boxes kept; {self.clipped} clipped to the "
                f"image, {self.dropped_degenerate} zero-area/inverted dropped, {self.negatives} images without "
                f"boxes kept as negatives, {self.crowd} crowd/difficult (ignored by training, by evaluation as COCO does)")


@dataclass
class ImageRecord:
    """One image and its annotations. ``boxes (N, 4)`` float32 xyxy; ``labels (N,)`` int64 in
    ``1..K``; ``iscrowd (N,)`` bool; ``segmentations``: N raw COCO segmentations or None."""

    path: Path
    image_id: int
    width: int
    height: int
    boxes: np.ndarray
    labels: np.ndarray
    iscrowd: np.ndarray
    segmentations: Optional[list[Any]] = None


@dataclass
class CocoAnnotations:
    """A whole annotation file: images, the category ids in label order, their names, the report."""

    records: list[ImageRecord]
    category_ids: list[int]
    class_names: list[str]
    report: FormatReport = field(default_factory=FormatReport)


def clean_boxes(boxes: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Clip ``(N, 4)`` xyxy boxes to the image; returns (clipped boxes, keep mask, number clipped).

    A box is kept when it still has positive width and height after clipping (inverted, zero-area
    and fully outside boxes are not)."""
    boxes = boxes.astype(np.float32).reshape(-1, 4)
    clipped = boxes.copy()
    clipped[:, 0::2] = clipped[:, 0::2].clip(0, width)
    clipped[:, 1::2] = clipped[:, 1::2].clip(0, height)
    keep = (clipped[:, 2] > clipped[:, 0]) & (clipped[:, 3] > clipped[:, 1])
    changed = int((np.abs(clipped - boxes).sum(1) > 0)[keep].sum())
    return clipped, keep, changed


def _load_json(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"COCO annotation file {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AnnotationError(f"{path}: malformed COCO json ({err})") from err
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: a COCO file is a json object with 'images', 'annotations', 'categories'; "
                              f"got a {type(data).__name__}")
    # an instances file without 'annotations' would train on all-negative images without a word
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise AnnotationError(f"{path}: missing or invalid {key!r} list")
    return data


def _number(value: Any, path: Path, where: str) -> float:
    """``value`` as a finite float, or an error naming the file and the entry."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not np.isfinite(number):
        raise AnnotationError(f"{path}: {where} is {value!r}, not a number")
    return number


def _coco_categories(data: dict, path: Path, category_ids: Optional[Sequence[int]]) -> tuple[dict[int, str], list[int]]:
    """``{id: name}`` of the file's categories and the label order (``category_ids`` or sorted ids)."""
    cats = {}
    for c in data["categories"]:
        if "id" not in c:
            raise AnnotationError(f"{path}: a category has no 'id': {c}")
        cats[int(c["id"])] = str(c.get("name", c["id"]))
    order = list(category_ids) if category_ids is not None else sorted(cats)
    missing = [c for c in order if c not in cats]
    if missing:
        raise AnnotationError(f"{path}: categories {missing} of the training file are not defined here")
    return cats, order


def _coco_images(data: dict, path: Path) -> dict[int, dict]:
    """``{id: image entry}``, each with an id, file name and integer width and height."""
    images: dict[int, dict] = {}
    for im in data["images"]:
        for key in ("id", "file_name", "width", "height"):
            if key not in im:
                raise AnnotationError(f"{path}: image entry {im.get('id', '?')} has no {key!r}")
        iid = int(_number(im["id"], path, f"the id of image {im['file_name']}"))
        if iid in images:
            raise AnnotationError(f"{path}: image id {iid!r} appears twice ({images[iid]['file_name']} and "
                                  f"{im['file_name']})")
        for key in ("width", "height"):
            im[key] = int(_number(im[key], path, f"image {iid} ({im['file_name']}) {key}"))
        images[iid] = im
    return images


def _coco_annotations(data: dict, path: Path, images: dict[int, dict], label_of: dict[int, int],
                      cats: dict[int, str], with_masks: bool) -> dict[int, list[dict]]:
    """Each image's annotations, every one checked (its image, a category with a label, its box; its
    mask when needed)."""
    per_image: dict[int, list[dict]] = {i: [] for i in images}
    for ann in data["annotations"]:
        aid = ann.get("id", "?")
        if ann.get("image_id") not in per_image:
            raise AnnotationError(f"{path}: annotation {aid} names image_id {ann.get('image_id')!r}, "
                                  f"which is not in 'images'")
        if ann.get("category_id") not in label_of:
            raise AnnotationError(f"{path}: annotation {aid} names category_id {ann.get('category_id')!r}, "
                                  f"which is not in 'categories' (known: {sorted(cats)[:20]})")
        if not isinstance(ann.get("bbox"), (list, tuple)) or len(ann["bbox"]) != 4:
            raise AnnotationError(f"{path}: annotation {aid} has no valid 'bbox' [x, y, w, h]")
        ann["bbox"] = [_number(v, path, f"annotation {aid} bbox[{i}]") for i, v in enumerate(ann["bbox"])]
        if with_masks and "segmentation" not in ann:
            raise AnnotationError(f"{path}: annotation {aid} has no 'segmentation' (needed for instance masks)")
        per_image[ann["image_id"]].append(ann)
    return per_image


def read_coco(path: str | Path, image_root: str | Path, with_masks: bool = False,
              category_ids: Optional[Sequence[int]] = None) -> CocoAnnotations:
    """Read a COCO instances file; images are ``image_root / file_name``.

    ``category_ids`` fixes the label order (e.g. the train file's, for a val file); by default the
    file's categories sorted by id map to labels 1..K."""
    path, image_root = Path(path), Path(image_root)
    data = _load_json(path)
    cats, order = _coco_categories(data, path, category_ids)
    label_of = {cid: i + 1 for i, cid in enumerate(order)}
    images = _coco_images(data, path)
    per_image = _coco_annotations(data, path, images, label_of, cats, with_masks)
    report = FormatReport(source=str(path))
    records = []
    for iid, im in images.items():
        anns = per_image[iid]
        W, H = int(im["width"]), int(im["height"])
        xywh = np.array([a["bbox"] for a in anns], np.float32).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        boxes, keep, clipped = clean_boxes(xyxy, W, H)
        report.clipped += clipped
        report.dropped_degenerate += int((~keep).sum())
        anns = [a for a, k in zip(anns, keep) if k]
        crowd = np.array([bool(a.get("iscrowd", 0)) for a in anns], bool)
        report.crowd += int(crowd.sum())
        report.annotations += len(anns)
        report.negatives += int(not anns)
        records.append(ImageRecord(
            path=image_root / im["file_name"], image_id=iid, width=W, height=H, boxes=boxes[keep],
            labels=np.array([label_of[a["category_id"]] for a in anns], np.int64), iscrowd=crowd,
            segmentations=[a["segmentation"] for a in anns] if with_masks else None))
    report.images = len(records)
    _log_report(report)
    return CocoAnnotations(records, order, [cats[c] for c in order], report)


def _log_report(report: FormatReport) -> None:
    if report.clipped or report.dropped_degenerate:
        log.warning(report.summary())
    else:
        log.info(report.summary())


def _xml_int(node: ET.Element, tag: str, path: Path) -> float:
    child = node.find(tag)
    if child is None or child.text is None:
        raise AnnotationError(f"{path}: missing <{tag}>")
    try:
        return float(child.text)
    except ValueError as err:
        raise AnnotationError(f"{path}: <{tag}> is not a number: {child.text!r}") from err


def read_voc(xml_files: Sequence[Path], image_dir: Optional[Path] = None,
             class_names: Optional[Sequence[str]] = None) -> CocoAnnotations:
    """Read Pascal-VOC XML files (one per image). Images are ``image_dir / <filename>`` (default:
    next to the XML). ``difficult`` objects become crowd (ignored, as in VOC evaluation).

    ``class_names`` fixes the label order; by default all names found, sorted. VOC pixel indices
    are 1-based: boxes are shifted by -1 on the min corner (detectron2's convention)."""
    parsed = []
    names_found: set[str] = set()
    for xml in map(Path, xml_files):
        try:
            root = ET.parse(xml).getroot()
        except (ET.ParseError, OSError) as err:
            raise AnnotationError(f"{xml}: malformed VOC XML ({err})") from err
        fname = root.findtext("filename")
        size = root.find("size")
        if not fname or size is None:
            raise AnnotationError(f"{xml}: a VOC annotation needs <filename> and <size>")
        objs = []
        for obj in root.findall("object"):
            name = (obj.findtext("name") or "").strip()
            box = obj.find("bndbox")
            if not name or box is None:
                raise AnnotationError(f"{xml}: an <object> without <name> or <bndbox>")
            xyxy = [_xml_int(box, t, xml) for t in ("xmin", "ymin", "xmax", "ymax")]
            objs.append((name, [xyxy[0] - 1, xyxy[1] - 1, xyxy[2], xyxy[3]], obj.findtext("difficult") == "1"))
            names_found.add(name)
        parsed.append((xml, fname, int(_xml_int(size, "width", xml)), int(_xml_int(size, "height", xml)), objs))
    order = list(class_names) if class_names else sorted(names_found)
    unknown = sorted(names_found - set(order))
    if unknown:
        raise AnnotationError(f"VOC annotations name classes {unknown} that are not in class_names {order}")
    label_of = {n: i + 1 for i, n in enumerate(order)}
    report = FormatReport(source=f"{len(parsed)} VOC XML files" + (f" in {parsed[0][0].parent}" if parsed else ""))
    records = []
    for i, (xml, fname, W, H, objs) in enumerate(parsed):
        boxes, keep, clipped = clean_boxes(np.array([o[1] for o in objs], np.float32), W, H)
        report.clipped += clipped
        report.dropped_degenerate += int((~keep).sum())
        objs = [o for o, k in zip(objs, keep) if k]
        crowd = np.array([o[2] for o in objs], bool)
        report.crowd += int(crowd.sum())
        report.annotations += len(objs)
        report.negatives += int(not objs)
        records.append(ImageRecord(path=(image_dir or xml.parent) / fname, image_id=i, width=W, height=H,
                                   boxes=boxes[keep], labels=np.array([label_of[o[0]] for o in objs], np.int64),
                                   iscrowd=crowd))
    report.images = len(records)
    _log_report(report)
    return CocoAnnotations(records, list(range(1, len(order) + 1)), order, report)


def decode_segmentation(segm: Any, height: int, width: int) -> np.ndarray:
    """A COCO segmentation (polygon list, uncompressed RLE with a counts list, or compressed RLE)
    -> ``(height, width)`` uint8 mask, decoded by pycocotools."""
    if isinstance(segm, list):  # polygons: a list of [x1, y1, x2, y2, ...]
        polys = [p for p in segm if len(p) >= 6]
        if not polys:
            return np.zeros((height, width), np.uint8)
        rle = mask_utils.merge(mask_utils.frPyObjects(polys, height, width))
    elif isinstance(segm, dict) and isinstance(segm.get("counts"), list):
        rle = mask_utils.frPyObjects(segm, height, width)
    elif isinstance(segm, dict) and "counts" in segm:
        rle = dict(segm)
        if isinstance(rle["counts"], str):
            rle["counts"] = rle["counts"].encode("ascii")
    else:
        raise AnnotationError(f"unknown segmentation format: {type(segm).__name__}")
    return mask_utils.decode(rle).astype(np.uint8)
