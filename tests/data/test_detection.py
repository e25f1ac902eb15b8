"""Detection data: COCO / VOC readers, bad input, masks, transforms, and the embedded tree tiles."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hydra_dense.data.detection import DetectionDataModule, RandomCropUpTo
from hydra_dense.data.detection_formats import AnnotationError, decode_segmentation, read_coco, read_voc
from hydra_dense.data.demo_instances import mask_to_rle
from hydra_dense.data.preflight import DataFilesError
from hydra_dense.data.segmentation import SampleError


def write_image(path: Path, w: int, h: int, seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


def make_coco(root: Path, with_bad: bool = True) -> Path:
    """Three images: one with a polygon, a compressed RLE, an uncompressed RLE and (if
    ``with_bad``) a box partly outside, a zero-area box and an inverted box; a crowd region;
    and an image without annotations. Category ids are 7 and 3 (not contiguous)."""
    write_image(root / "imgs" / "a.png", 60, 40, 0)
    write_image(root / "imgs" / "b.png", 50, 50, 1)
    write_image(root / "imgs" / "empty.png", 30, 20, 2)
    m = np.zeros((50, 50), bool)
    m[10:20, 5:25] = True
    anns = [
        dict(id=1, image_id=10, category_id=7, bbox=[10, 5, 20, 10], iscrowd=0,
             segmentation=[[10, 5, 30, 5, 30, 15, 10, 15]]),
        dict(id=2, image_id=11, category_id=3, bbox=[5, 10, 20, 10], iscrowd=0, segmentation=mask_to_rle(m, True)),
        dict(id=3, image_id=11, category_id=7, bbox=[5, 10, 20, 10], iscrowd=0, segmentation=mask_to_rle(m, False)),
        dict(id=4, image_id=10, category_id=3, bbox=[0, 0, 8, 8], iscrowd=1, segmentation=mask_to_rle(
            np.pad(np.ones((8, 8), bool), ((0, 32), (0, 52))), False)),
    ]
    if with_bad:
        anns += [dict(id=5, image_id=10, category_id=3, bbox=[50, 30, 20, 20], iscrowd=0, segmentation=[]),
                 dict(id=6, image_id=10, category_id=3, bbox=[5, 5, 0, 10], iscrowd=0, segmentation=[]),
                 dict(id=7, image_id=11, category_id=3, bbox=[30, 30, -5, 5], iscrowd=0, segmentation=[])]
    data = dict(images=[dict(id=10, file_name="a.png", width=60, height=40),
                        dict(id=11, file_name="b.png", width=50, height=50),
                        dict(id=12, file_name="empty.png", width=30, height=20)],
                annotations=anns, categories=[dict(id=7, name="cat"), dict(id=3, name="dog")])
    path = root / "ann.json"
    path.write_text(json.dumps(data))
    return path


def test_coco_reader_maps_categories_and_handles_bad_boxes(tmp_path):
    ann = read_coco(make_coco(tmp_path), tmp_path / "imgs", with_masks=True)
    assert ann.category_ids == [3, 7] and ann.class_names == ["dog", "cat"]  # id order -> labels 1, 2
    rep = ann.report
    assert (rep.images, rep.clipped, rep.dropped_degenerate, rep.negatives, rep.crowd) == (3, 1, 2, 1, 1)
    by_id = {r.image_id: r for r in ann.records}
    a = by_id[10]
    assert a.labels.tolist() == [2, 1, 1] and a.iscrowd.tolist() == [False, True, False]
    np.testing.assert_allclose(a.boxes[0], [10, 5, 30, 15])
    np.testing.assert_allclose(a.boxes[2], [50, 30, 60, 40])  # clipped to the 60x40 image
    assert len(by_id[12].labels) == 0 and by_id[12].boxes.shape == (0, 4)  # negative kept
    assert "1 clipped" in rep.summary() and "2 zero-area/inverted dropped" in rep.summary()


def test_masks_decode_polygon_and_both_rle_forms(tmp_path):
    ann = read_coco(make_coco(tmp_path), tmp_path / "imgs", with_masks=True)
    rec = {r.image_id: r for r in ann.records}
    poly = decode_segmentation(rec[10].segmentations[0], 40, 60)
    # the 20x10 rectangle polygon: pycocotools rasterises its area to within one pixel row/column
    assert abs(int(poly.sum()) - 200) <= 30 and poly[8:12, 15:25].all() and not poly[20:].any()
    expected = np.zeros((50, 50), np.uint8)
    expected[10:20, 5:25] = 1
    for segm in rec[11].segmentations:
        assert np.array_equal(decode_segmentation(segm, 50, 50), expected)


def test_coco_errors_name_the_file_and_entry(tmp_path):
    path = make_coco(tmp_path)
    data = json.loads(path.read_text())
    bad = dict(data, annotations=data["annotations"] + [dict(id=99, image_id=10, category_id=5, bbox=[0, 0, 1, 1])])
    (tmp_path / "badcat.json").write_text(json.dumps(bad))
    with pytest.raises(AnnotationError, match=r"badcat.json.*annotation 99.*category_id 5"):
        read_coco(tmp_path / "badcat.json", tmp_path / "imgs")
    bad = dict(data, annotations=[dict(id=98, image_id=1234, category_id=3, bbox=[0, 0, 1, 1])])
    (tmp_path / "badimg.json").write_text(json.dumps(bad))
    with pytest.raises(AnnotationError, match=r"badimg.json.*annotation 98.*image_id 1234"):
        read_coco(tmp_path / "badimg.json", tmp_path / "imgs")
    (tmp_path / "broken.json").write_text('{"images": [')
    with pytest.raises(AnnotationError, match=r"broken.json: malformed COCO json"):
        read_coco(tmp_path / "broken.json", tmp_path / "imgs")
    (tmp_path / "nocats.json").write_text(json.dumps(dict(images=[], annotations=[])))
    with pytest.raises(AnnotationError, match=r"nocats.json: missing or invalid 'categories'"):
        read_coco(tmp_path / "nocats.json", tmp_path / "imgs")
    with pytest.raises(FileNotFoundError, match="nothere.json"):
        read_coco(tmp_path / "nothere.json", tmp_path / "imgs")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("annotations"), r"missing or invalid 'annotations'"),
    (lambda d: d["images"].append(dict(d["images"][0], file_name="again.png")),
     r"image id 10 appears twice \(a.png and again.png\)"),
    (lambda d: d["annotations"][0].update(bbox=[10, "5,0", 20, 10]), r"annotation 1 bbox\[1\] is '5,0', not a number"),
    (lambda d: d["annotations"][0].update(bbox=[10, 5, None, 10]), r"annotation 1 bbox\[2\] is None"),
    (lambda d: d["images"][1].update(width="wide"), r"image 11 \(b.png\) width is 'wide', not a number"),
    (lambda d: d["images"][2].update(height=float("nan")), r"image 12 \(empty.png\) height is nan"),
], ids=["no_annotations", "duplicate_id", "bbox_text", "bbox_null", "width_text", "height_nan"])
def test_coco_silent_or_bare_failures_become_errors_naming_file_and_entry(change, message, tmp_path):
    data = json.loads(make_coco(tmp_path).read_text())
    change(data)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(data))
    with pytest.raises(AnnotationError, match=r"changed.json: .*" + message):
        read_coco(path, tmp_path / "imgs")


def test_voc_reader(tmp_path):
    xml = """<annotation><filename>{f}</filename><size><width>40</width><height>30</height><depth>3</depth></size>
    <object><name>tree</name><difficult>0</difficult><bndbox><xmin>2</xmin><ymin>3</ymin><xmax>12</xmax><ymax>13</ymax></bndbox></object>
    <object><name>car</name><difficult>1</difficult><bndbox><xmin>5</xmin><ymin>5</ymin><xmax>50</xmax><ymax>9</ymax></bndbox></object>
    <object><name>car</name><bndbox><xmin>9</xmin><ymin>9</ymin><xmax>7</xmax><ymax>20</ymax></bndbox></object>
    </annotation>"""
    (tmp_path / "a.xml").write_text(xml.format(f="a.jpg"))
    ann = read_voc([tmp_path / "a.xml"])
    rec = ann.records[0]
    assert ann.class_names == ["car", "tree"] and rec.labels.tolist() == [2, 1]
    np.testing.assert_allclose(rec.boxes, [[1, 2, 12, 13], [4, 4, 40, 9]])  # 1-based -> 0-based; clipped
    assert rec.iscrowd.tolist() == [False, True]
    assert (ann.report.clipped, ann.report.dropped_degenerate) == (1, 1)
    (tmp_path / "b.xml").write_text("<annotation><filename>")
    with pytest.raises(AnnotationError, match="b.xml: malformed VOC XML"):
        read_voc([tmp_path / "b.xml"])


def test_voc_layout_data_module(tmp_path):
    xml = ("<annotation><filename>{i}.jpg</filename><size><width>32</width><height>24</height></size><object>"
           "<name>tree</name><bndbox><xmin>3</xmin><ymin>3</ymin><xmax>20</xmax><ymax>15</ymax></bndbox>"
           "</object></annotation>")
    for i in ("x1", "x2", "x3"):
        (tmp_path / "Annotations").mkdir(exist_ok=True)
        (tmp_path / "Annotations" / f"{i}.xml").write_text(xml.format(i=i))
        write_image(tmp_path / "JPEGImages" / f"{i}.jpg", 32, 24)
    (tmp_path / "ImageSets" / "Main").mkdir(parents=True)
    (tmp_path / "ImageSets" / "Main" / "train.txt").write_text("x1\nx2\n")
    (tmp_path / "ImageSets" / "Main" / "val.txt").write_text("x3\n")
    dm = DetectionDataModule(str(tmp_path), format="voc", num_workers=0, batch_size=2, hflip=False)
    dm.setup("fit")
    assert dm.class_names == ["tree"] and len(dm.datasets["train"]) == 2 and len(dm.datasets["val"]) == 1
    images, targets, idx = next(iter(dm.train_dataloader()))
    assert images[0].shape == (3, 24, 32) and images[0].dtype == torch.float32 and float(images[0].max()) <= 1
    assert targets[0]["boxes"].tolist() == [[2.0, 2.0, 20.0, 15.0]] and targets[0]["labels"].tolist() == [1]
    (tmp_path / "ImageSets" / "Main" / "val.txt").write_text("x3\nmissing\n")
    with pytest.raises(FileNotFoundError, match="missing"):
        DetectionDataModule(str(tmp_path), format="voc", num_workers=0).setup("validate")


def test_data_module_samples_masks_crowd_and_errors(tmp_path):
    make_coco(tmp_path)
    kw = dict(format="coco", train_json="ann.json", val_json="ann.json", train_images="imgs", val_images="imgs",
              num_workers=0, hflip=False)
    dm = DetectionDataModule(str(tmp_path), masks=True, **kw)
    dm.setup("fit")
    img, target, _ = dm.datasets["train"][0]  # image 10: the crowd region is dropped for training
    assert img.shape == (3, 40, 60) and target["labels"].tolist() == [2, 1]
    assert target["masks"].shape == (2, 40, 60) and target["masks"].dtype == torch.uint8
    _, target, _ = dm.datasets["val"][0]  # evaluation keeps it, flagged
    assert target["iscrowd"].tolist() == [False, True, False] and target["image_id"] == 10
    _, target, _ = dm.datasets["val"][2]
    assert target["boxes"].shape == (0, 4)  # the negative image
    assert "1 clipped" in dm.data_report()
    with pytest.raises(ValueError, match=r"num_classes=5 .*defines 2 categories"):
        DetectionDataModule(str(tmp_path), num_classes=5, **kw)
    with pytest.raises(FileNotFoundError, match="data.val_images"):
        DetectionDataModule(str(tmp_path), **dict(kw, val_images="nope")).setup("validate")
    (tmp_path / "imgs" / "b.png").write_bytes(b"not a png")
    dm = DetectionDataModule(str(tmp_path), **kw)
    with pytest.raises(DataFilesError, match=r"val: image .*b.png cannot be read"):  # before anything runs
        dm.setup("validate")
    with pytest.raises(SampleError, match="b.png"):  # and the reader, for a file that breaks after the check
        dm.datasets["val"][1]
    dm = DetectionDataModule(str(tmp_path), skip_bad=True, **kw)
    dm.setup("validate")
    assert dm.datasets["val"][1] is None and dm.skipped_report() == {"val": 1}
    write_image(tmp_path / "imgs" / "b.png", 40, 50)  # annotation says 50x50
    dm = DetectionDataModule(str(tmp_path), **kw)
    with pytest.raises(DataFilesError, match=r"image .*b.png is 40x50 but .*ann.json says 50x50"):
        dm.setup("validate")
    with pytest.raises(SampleError, match=r"b.png is 40x50 but its annotation says 50x50"):
        dm.datasets["val"][1]


def test_lsj_crop_keeps_boxes_and_masks_aligned(tmp_path):
    make_coco(tmp_path, with_bad=False)
    dm = DetectionDataModule(str(tmp_path), format="coco", train_json="ann.json", val_json="ann.json",
                             train_images="imgs", val_images="imgs", masks=True, lsj=True, train_size=32,
                             scale_range=(0.5, 1.5), num_workers=0)
    dm.setup("fit")
    torch.manual_seed(0)
    for _ in range(20):
        img, t, i = dm.datasets["train"][1]
        assert max(img.shape[-2:]) <= 32  # cropped to at most train_size, never padded
        for box, mask in zip(t["boxes"], t["masks"]):
            ys, xs = torch.nonzero(mask, as_tuple=True)
            assert len(ys) > 0
            # the box still encloses its (resized, cropped) mask, within resampling slack
            assert xs.min() >= box[0] - 2 and xs.max() <= box[2] + 2 and ys.min() >= box[1] - 2 and ys.max() <= box[3] + 2
    crop = RandomCropUpTo(16)
    assert crop(torch.zeros(3, 10, 40)).shape == (3, 10, 16)


def test_crop_drops_boxes_mostly_cut_off():
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    boxes = tv_tensors.BoundingBoxes(torch.tensor([[0.0, 0, 10, 10], [36, 5, 46, 15], [35, 20, 45, 30]]),
                                     format="XYXY", canvas_size=(50, 50))
    masks = tv_tensors.Mask(torch.ones(3, 50, 50, dtype=torch.uint8))
    t = dict(boxes=boxes, labels=torch.tensor([1, 2, 3]), masks=masks)
    crop = RandomCropUpTo(40, min_visible=0.5)
    crop.make_params = lambda flat: dict(top=0, left=0, height=40, width=40)
    img, out = v2.Compose([crop, v2.SanitizeBoundingBoxes()])(tv_tensors.Image(torch.zeros(3, 50, 50)), t)
    # the 2nd box keeps 4 of its 10 columns (dropped), the 3rd exactly half (kept, clipped)
    assert out["labels"].tolist() == [1, 3] and out["masks"].shape == (2, 40, 40)
    assert out["boxes"].tolist() == [[0, 0, 10, 10], [35, 20, 40, 30]]


def test_tree_tiles_split_by_area_without_leaks(tmp_path):
    from hydra_dense.data.demo_detection import prepare

    limit = Image.MAX_IMAGE_PIXELS
    root = prepare(tmp_path / "trees", tile=320)
    assert prepare(tmp_path / "trees", tile=320) == root  # cached
    # its orthophotos are read over PIL's limit, and the limit is back for every later reader
    assert Image.MAX_IMAGE_PIXELS == limit is not None
    tiles = {}
    for split in ("train", "val"):
        data = json.loads((root / "annotations" / f"instances_{split}.json").read_text())
        assert data["annotations"] and data["categories"] == [dict(id=1, name="tree")]
        for im in data["images"]:
            stem, y, x = im["file_name"][:-4].rsplit("_", 2)
            tiles.setdefault(stem, {}).setdefault(split, []).append((int(y[1:]), int(y[1:]) + im["height"]))
            assert Image.open(root / split / im["file_name"]).size == (im["width"], im["height"])
        for a in data["annotations"]:
            im = next(i for i in data["images"] if i["id"] == a["image_id"])
            x, y, w, h = a["bbox"]
            assert w > 0 and h > 0 and x + w <= im["width"] and y + h <= im["height"]
    for stem, splits in tiles.items():
        if len(splits) == 2:  # a large image cut in two: every val row lies below every train row
            assert max(b for _, b in splits["train"]) <= min(a for a, _ in splits["val"]), stem
    assert len(tiles) == 4  # the 4 annotated orthophotos


def test_a_tuning_split_holds_out_matching_images_and_reads_like_the_source(tmp_path):
    from hydra_dense.data.holdout import hold_out_coco

    root = tmp_path / "src"
    (root / "annotations").mkdir(parents=True)
    (root / "train").mkdir()
    images = [dict(id=i, file_name=f"area{i // 2}_tile{i}.png", width=8, height=8) for i in range(4)]
    boxes = [dict(id=10 + i, image_id=i, category_id=1, bbox=[0, 0, 4, 4], area=16, iscrowd=0) for i in range(4)]
    (root / "annotations" / "instances_train.json").write_text(
        json.dumps(dict(images=images, annotations=boxes, categories=[dict(id=1, name="tree")])))
    counts = hold_out_coco(root, tmp_path / "tune", ["area1_"])
    assert counts == dict(train_images=2, train_boxes=2, val_images=2, val_boxes=2)
    val = json.loads((tmp_path / "tune" / "annotations" / "instances_val.json").read_text())
    assert [im["file_name"] for im in val["images"]] == ["area1_tile2.png", "area1_tile3.png"]
    assert {a["image_id"] for a in val["annotations"]} == {2, 3} and val["categories"][0]["name"] == "tree"
    assert (tmp_path / "tune" / "val").resolve() == (root / "train").resolve()
    with pytest.raises(ValueError, match="instances_train.json.*holds out 0 of 4"):
        hold_out_coco(root, tmp_path / "none", ["nothing"])
