"""What a comparison run starts from, read from its config: the pretrained weights or none, and
the embedded data sets to prepare."""
from pathlib import Path

from hydra_dense.comparison.run_setup import uses_pretrained
from hydra_dense.data import embedded
from hydra_dense.data.embedded import data_paths
from tests.helpers.tiny_runs import ROOT


def test_which_configs_start_from_the_pretrained_image_weights_is_read_from_their_class_paths():
    """Read from the model's and the backbone's class_path (a backbone YAML file followed), not
    guessed from the config text: the K400 configs name their VideoViT only in a backbone file."""
    configs = ROOT / "configs"
    assert uses_pretrained(configs / "segmentation" / "demo_digits.yaml")
    assert uses_pretrained(configs / "detection" / "coco_mask_rcnn_vitdet_b16.yaml")  # backbone in ../backbones
    assert not uses_pretrained(configs / "video" / "demo_moving_digits.yaml")
    assert not uses_pretrained(configs / "video" / "k400_vit_b16_joint_msa.yaml")
    assert not uses_pretrained(configs / "mm" / "seg_digits_tiny.yaml")


def test_the_data_to_prepare_is_what_the_data_section_points_at_not_what_comments_say(tmp_path):
    folders = lambda c: {part for p in data_paths(c) for part in Path(p).parts}  # noqa: E731
    assert "digit_scenes" in folders(ROOT / "configs" / "segmentation" / "demo_digits.yaml")
    assert "digit_instances" in folders(ROOT / "configs" / "mm" / "det_digits_tiny.yaml")  # in the wrapped .py
    config = tmp_path / "c.yaml"
    config.write_text("# trained like the digit_scenes demo\nmodel: {class_path: x}\n"
                      "data: {class_path: y, init_args: {root: /data/ADEChallengeData2016, layout: ade20k}}\n")
    assert data_paths(config) == ["/data/ADEChallengeData2016", "ade20k"]


def test_embedded_data_is_prepared_where_the_config_reads_it_and_never_into_a_user_folder(tmp_path, monkeypatch):
    """A config naming a toolkit cache other than ``$HYDRA_DENSE_CACHE`` (the shipped ones name
    ``~/.cache/hydra_dense``) gets its data there; a user's folder that shares a demo's name is left
    alone and the demo goes to the cache."""
    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "elsewhere"))
    prepared = []
    monkeypatch.setitem(embedded.EMBEDDED, "digit_scenes_448", prepared.append)
    monkeypatch.setitem(embedded.EMBEDDED, "natural_images", prepared.append)
    config = tmp_path / "c.yaml"
    config.write_text(f"model: {{class_path: x}}\ndata: {{class_path: y, init_args: {{"
                      f"root: {tmp_path}/home/.cache/hydra_dense/data/digit_scenes_448, "
                      f"extra: [/data/mine/natural_images/train]}}}}\n")
    embedded.prepare_embedded_data(config)
    assert prepared == [tmp_path / "home/.cache/hydra_dense/data/digit_scenes_448", None]


def test_a_users_subclass_of_a_video_backbone_or_task_is_read_as_its_base(tmp_path, monkeypatch):
    """The kind of a config's task and backbone is asked of the classes (``issubclass``), so a
    user's own ``MyVideoBackbone(VideoViT)`` trains from scratch like VideoViT does."""
    import sys
    import types

    from hydra_dense.backbones import VideoViT, ViT
    from hydra_dense.conversion.cache import is_video_backbone
    from hydra_dense.tasks import SegmentationTask

    users = types.ModuleType("users_models")
    users.MyVideoBackbone = type("MyVideoBackbone", (VideoViT,), {})
    users.MyImageBackbone = type("MyImageBackbone", (ViT,), {})
    users.MySegmentation = type("MySegmentation", (SegmentationTask,), {})
    monkeypatch.setitem(sys.modules, "users_models", users)
    assert is_video_backbone({"class_path": "users_models.MyVideoBackbone"})
    assert not is_video_backbone({"class_path": "users_models.MyImageBackbone"})
    for backbone, expected in (("MyVideoBackbone", False), ("MyImageBackbone", True)):
        config = tmp_path / f"{backbone}.yaml"
        config.write_text(f"model:\n  class_path: users_models.MySegmentation\n  init_args:\n    backbone:\n"
                          f"      class_path: users_models.{backbone}\n")
        assert uses_pretrained(config) is expected
