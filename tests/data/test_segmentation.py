"""Which files a segmentation split holds: symlinked subfolders followed, listed stems all found,
folders named like images and a file given as the root named for what they are."""
import os

import pytest

from hydra_dense.data.files import files_under
from hydra_dense.data.segmentation import SegmentationDataModule, find_pairs
from tests.helpers.images import make_ade


def test_a_symlinked_subfolder_of_images_and_masks_is_read_whole(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=4, n_val=1)
    extra = make_ade(tmp_path / "elsewhere", n_train=3, n_val=1)
    for kind in ("images", "annotations"):
        os.symlink(extra / kind / "training", root / kind / "training" / "more")
    os.symlink(root / "images" / "training", root / "images" / "training" / "more" / "loop")  # a cycle ends
    pairs = find_pairs(root, "ade20k", "train")
    assert len(pairs) == 4 + 3
    assert all(mask.is_file() for _, mask in pairs)


def test_a_split_list_naming_a_missing_image_is_refused_naming_it(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=3, n_val=1)
    (root / "train.txt").write_text("ADE_0000\nADE_0002\nADE_9999\n")
    with pytest.raises(FileNotFoundError, match=r"train.txt names 1 image\(s\) not in .*: ADE_9999"):
        find_pairs(root, "ade20k", "train", split_file="{split}.txt")
    (root / "train.txt").write_text("ADE_0000\nADE_0002\n")
    assert len(find_pairs(root, "ade20k", "train", split_file="{split}.txt")) == 2


def test_a_folder_named_like_an_image_and_a_file_as_root_are_named_for_what_they_are(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=2, n_val=1)
    (root / "images" / "training" / "s3.png").mkdir()
    assert len(find_pairs(root, "ade20k", "train")) == 2
    assert all(p.is_file() for p in files_under(root / "images"))
    (tmp_path / "root.txt").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match="data.root: .*root.txt is a file, not a dataset folder"):
        SegmentationDataModule(str(tmp_path / "root.txt"), num_classes=4)
