"""A tuning split carved out of a COCO-format training set, so that recipe changes are chosen on
images that are neither trained on nor the reported validation split.

    python -m hydra_dense.data.holdout --root ~/.cache/hydra_dense/data/deepforest_trees \\
        --match crop2_y1600 image_crop_y0640 --out runs/trees_tuning

writes ``<out>/annotations/instances_{train,val}.json`` (the kept training images, and the held-out
ones as ``val``) and links ``<out>/train`` and ``<out>/val`` to the source's training images, so the
task config runs unchanged with ``--data.init_args.root=<out>``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

__all__ = ["hold_out_coco"]


def hold_out_coco(root: Path, out: Path, match: Sequence[str], train_json: str = "annotations/instances_train.json",
                  train_images: str = "train") -> dict[str, int]:
    """Split ``root``'s training annotations: images whose file name contains any of ``match`` become
    the tuning ``val`` split, the rest stay ``train``. Returns image and box counts of both; raises
    naming the file if nothing or everything would be held out."""
    root, out = Path(root).expanduser(), Path(out).expanduser()
    src = root / train_json
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no training annotations (a COCO json) there")
    coco = json.loads(src.read_text())
    held = {im["id"] for im in coco["images"] if any(m in im["file_name"] for m in match)}
    if not held or len(held) == len(coco["images"]):
        raise ValueError(f"{src}: --match {list(match)} holds out {len(held)} of {len(coco['images'])} images; "
                         "it must leave some images on each side")

    def part(tuning: bool) -> dict:
        return dict(coco, images=[im for im in coco["images"] if (im["id"] in held) == tuning],
                    annotations=[a for a in coco["annotations"] if (a["image_id"] in held) == tuning])

    (out / "annotations").mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, tuning in (("train", False), ("val", True)):
        data = part(tuning)
        (out / "annotations" / f"instances_{split}.json").write_text(json.dumps(data))
        link = out / split
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to((root / train_images).resolve(), target_is_directory=True)
        counts[f"{split}_images"], counts[f"{split}_boxes"] = len(data["images"]), len(data["annotations"])
    return counts


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="the dataset root (COCO layout: annotations/, train/)")
    p.add_argument("--match", nargs="+", required=True, help="file-name substrings of the images to hold out")
    p.add_argument("--out", required=True, help="the tuning dataset root to write")
    args = p.parse_args(argv)
    counts = hold_out_coco(Path(args.root), Path(args.out), args.match)
    print(f"[holdout] {args.out}: train {counts['train_images']} images / {counts['train_boxes']} boxes, "
          f"tuning (val) {counts['val_images']} images / {counts['val_boxes']} boxes")


if __name__ == "__main__":
    main()
