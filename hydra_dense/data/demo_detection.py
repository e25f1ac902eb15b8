"""The embedded detection default: real aerial tree crowns from the ``deepforest`` package, tiled.

``deepforest`` 2.1.0 (PyPI) ships four annotated RGB orthophotos of NEON sites with hand-drawn
tree-crown boxes in Pascal-VOC XML: two Yellowstone crops (2299x2472, 574 trees; 1249x1035, 279
trees) and two 400x400 plots (OSBS_029, 61 trees; SOAP_061, 37 trees). The wheel is fetched once
with ``pip download --no-deps`` (nothing installed) and the XML is read by this project's VOC
reader. The large images are cut into ``tile``-pixel tiles; **train and val are split by image
area** — the bottom ``val_fraction`` of each large image is validation, the rest training, and no
tile crosses the line — so no tree is seen in both. OSBS_029 goes to train, SOAP_061 (another
site) to val. A box cut by a tile edge is clipped and kept when at least ``min_visible`` of it is
inside. Written in the COCO layout the user's data would have::

    <root>/train/*.png, <root>/val/*.png
    <root>/annotations/instances_{train,val}.json    (one category: tree)

    python -m hydra_dense.data.demo_detection [--root PATH]
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

from .detection_formats import read_voc
from .files import pil_pixel_limit
from .sources import cache_dir, demo_parser, is_prepared, mark_prepared, wheel_path

__all__ = ["prepare", "default_root", "DEEPFOREST"]

DEEPFOREST = ("deepforest", "2.1.0")
LARGE = ["2019_YELL_2_528000_4978000_image_crop2", "2019_YELL_2_541000_4977000_image_crop"]
WHOLE = {"OSBS_029": "train", "SOAP_061": "val"}
VERSION = 1


def default_root() -> Path:
    return cache_dir() / "data" / "deepforest_trees"


def _extract(raw: Path) -> list[Path]:
    """The annotated images and their XML out of the wheel; returns the XML paths."""
    raw.mkdir(parents=True, exist_ok=True)
    xmls = []
    with zipfile.ZipFile(wheel_path(*DEEPFOREST)) as zf:
        for stem in LARGE + list(WHOLE):
            for ext in (".xml", ".png"):
                dst = raw / f"{stem}{ext}"
                if not dst.is_file():
                    dst.write_bytes(zf.read(f"deepforest/data/{stem}{ext}"))
            xmls.append(raw / f"{stem}.xml")
    return xmls


def _tiles(x0: int, x1: int, tile: int, min_side: int) -> list[tuple[int, int]]:
    """[x0, x1) cut into tiles of ``tile``; a last remainder under ``min_side`` is dropped."""
    out = [(x, min(x + tile, x1)) for x in range(x0, x1, tile)]
    return [(a, b) for a, b in out if b - a >= min_side]


def prepare(root: Optional[str | Path] = None, tile: int = 320, val_fraction: float = 0.25,
            min_visible: float = 0.5, force: bool = False) -> Path:
    """Write the tiled COCO dataset under ``root`` (default: the cache) once; return ``root``."""
    root = Path(root) if root else default_root()
    stamp = root / "meta.json"
    meta = dict(version=VERSION, tile=tile, val_fraction=val_fraction, min_visible=min_visible,
                source=f"{DEEPFOREST[0]}=={DEEPFOREST[1]} (PyPI wheel, deepforest/data)")
    if is_prepared(stamp, meta, force):
        return root
    xmls = _extract(root / "raw")
    ann = read_voc(xmls)  # SOAP_061 labels Alive / Dead: every crown is one class, "tree", here
    coco = {s: dict(images=[], annotations=[], categories=[dict(id=1, name="tree")]) for s in ("train", "val")}
    for split in coco:
        (root / split).mkdir(parents=True, exist_ok=True)
    for xml, rec in zip(xmls, ann.records):
        stem = xml.stem  # the XML may name the .tif original; the wheel's .png has the same pixels
        with pil_pixel_limit(None):  # the wheel's orthophotos are over PIL's default limit; no other reader's
            img = np.asarray(Image.open(io.BytesIO(xml.with_suffix(".png").read_bytes())).convert("RGB"))
        H, W = img.shape[:2]
        assert (W, H) == (rec.width, rec.height), f"{xml}: size differs from its image"
        if stem in WHOLE:
            regions = [(WHOLE[stem], [(0, H)], [(0, W)])]
        else:
            cut = H - int(round(val_fraction * H))
            cols = _tiles(0, W, tile, tile // 3)
            regions = [("train", _tiles(0, cut, tile, tile // 3), cols), ("val", _tiles(cut, H, tile, tile // 3), cols)]
        areas = (rec.boxes[:, 2] - rec.boxes[:, 0]) * (rec.boxes[:, 3] - rec.boxes[:, 1])
        for split, rows, cols in regions:
            for y0, y1 in rows:
                for x0, x1 in cols:
                    b = rec.boxes.copy()
                    b[:, 0::2] = b[:, 0::2].clip(x0, x1) - x0
                    b[:, 1::2] = b[:, 1::2].clip(y0, y1) - y0
                    visible = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
                    keep = visible >= min_visible * areas
                    name = f"{stem}_y{y0:04d}_x{x0:04d}.png"
                    Image.fromarray(img[y0:y1, x0:x1]).save(root / split / name)
                    image_id = len(coco["train"]["images"]) + len(coco["val"]["images"]) + 1
                    coco[split]["images"].append(dict(id=image_id, file_name=name, width=x1 - x0, height=y1 - y0))
                    for box in b[keep]:
                        x, y, w, h = (float(box[0]), float(box[1]), float(box[2] - box[0]), float(box[3] - box[1]))
                        coco[split]["annotations"].append(dict(
                            id=sum(len(c["annotations"]) for c in coco.values()) + 1, image_id=image_id,
                            category_id=1, bbox=[x, y, w, h], area=w * h, iscrowd=0))
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split, data in coco.items():
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(data))
    mark_prepared(stamp, meta)
    return root


def main(argv: Optional[list[str]] = None) -> None:
    p = demo_parser(__doc__, default_root())
    p.add_argument("--tile", type=int, default=320)
    args = p.parse_args(argv)
    root = prepare(args.root, tile=args.tile, force=args.force)
    for split in ("train", "val"):
        data = json.loads((root / "annotations" / f"instances_{split}.json").read_text())
        print(f"{split}: {len(data['images'])} tiles, {len(data['annotations'])} trees")
    print(root)


if __name__ == "__main__":
    main()
