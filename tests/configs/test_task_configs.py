"""Every shipped task, cluster and conversion config builds from YAML plus command-line overrides
alone (data pointed at tiny sets); the backbone configs are in test_backbone_configs.py."""
import pytest
import yaml

from hydra_dense.data.demo_instances import prepare as prepare_instances
from hydra_dense.tasks import DetectionTask, SegmentationTask
from tests.helpers.images import make_ade
from tests.helpers.tiny_runs import ROOT


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return prepare_instances(tmp_path_factory.mktemp("inst"), n_train=12, n_val=6, size=80)


@pytest.fixture(scope="module")
def tiny_kinetics(tmp_path_factory):
    import numpy as np

    pytest.importorskip("av")
    from hydra_dense.data.demo_video import write_mp4

    root = tmp_path_factory.mktemp("kinetics")
    for split in ("train", "val"):
        for cls in ("a", "b"):
            write_mp4(root / split / cls / "0.mp4", np.zeros((8, 32, 32, 3), np.uint8))
    return root


SEGMENTATION = sorted((ROOT / "configs" / "segmentation").glob("*.yaml"))
DETECTION = sorted((ROOT / "configs" / "detection").glob("*.yaml"))
VIDEO = sorted((ROOT / "configs" / "video").glob("*.yaml"))


@pytest.mark.parametrize("path", SEGMENTATION, ids=lambda p: p.stem)
def test_segmentation_configs_instantiate(path, tmp_path):
    from hydra_dense.cli import main

    root = make_ade(tmp_path / "data", n_train=2, n_val=1)
    cli = main(["--config", str(path), f"--data.init_args.root={root}", "--data.init_args.layout=ade20k",
                f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert isinstance(cli.model, SegmentationTask)
    assert cli.model.hparams.num_classes == cli.datamodule.num_classes
    assert type(cli.model.backbone).__name__ == "ViT"


@pytest.mark.parametrize("path", DETECTION, ids=lambda p: p.stem)
def test_detection_configs_instantiate(path, digits, tmp_path):
    """Every shipped detection config builds from YAML plus command-line overrides alone (the
    data pointed at the tiny instance set)."""
    from hydra_dense.cli import main

    masks = "mask_rcnn" in path.read_text()
    cli = main(["--config", str(path), f"--data.init_args.root={digits}", "--data.init_args.format=coco",
                "--data.init_args.train_json=annotations/instances_train.json",
                "--data.init_args.val_json=annotations/instances_val.json", "--data.init_args.train_images=train",
                "--data.init_args.val_images=val", "--data.init_args.num_classes=10",
                "--model.init_args.num_classes=10", f"--data.init_args.masks={str(masks).lower()}",
                f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert isinstance(cli.model, DetectionTask) and cli.model.hparams.num_classes == cli.datamodule.num_classes


@pytest.mark.parametrize("path", VIDEO, ids=lambda p: p.stem)
def test_video_configs_instantiate(path, tiny_kinetics, tmp_path):
    from hydra_dense.cli import main
    from hydra_dense.tasks import VideoClassificationTask

    cli = main(["--config", str(path), f"--data.init_args.root={tiny_kinetics}", "--data.init_args.layout=kinetics",
                "--data.init_args.num_classes=2", "--model.init_args.num_classes=2",
                f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert isinstance(cli.model, VideoClassificationTask) and type(cli.model.backbone).__name__ == "VideoViT"


@pytest.mark.parametrize("cluster", sorted((ROOT / "configs" / "cluster").glob("*.yaml")), ids=lambda p: p.stem)
def test_cluster_configs_compose_with_a_task_config(cluster, tiny_kinetics, tmp_path):
    from hydra_dense.cli import main
    from hydra_dense.tasks import VideoClassificationTask

    cli = main(["--config", str(ROOT / "configs" / "video" / "demo_moving_digits.yaml"), "--config", str(cluster),
                f"--data.init_args.root={tiny_kinetics}", "--data.init_args.num_classes=2",
                "--model.init_args.num_classes=2", "--trainer.accelerator=cpu", "--trainer.devices=1",
                f"--trainer.default_root_dir={tmp_path}"], run=False)
    wanted = yaml.safe_load(cluster.read_text())["trainer"]
    assert isinstance(cli.model, VideoClassificationTask)  # the task config's model, the cluster file's trainer
    if isinstance(wanted.get("strategy"), dict):
        assert type(cli.trainer.strategy).__name__ == wanted["strategy"]["class_path"].rsplit(".", 1)[1]
    if "precision" in wanted:
        assert str(cli.trainer.precision).startswith(str(wanted["precision"]).split("-")[0])


def test_the_video_conversion_config_instantiates(tiny_kinetics, tmp_path):
    import torch

    from hydra_dense.backbones import VideoViT
    from hydra_dense.cli import main
    from hydra_dense.conversion import ConversionTask

    teacher = VideoViT(None, embed_dim=192, depth=6, num_heads=3, patch_size=8, tubelet_size=2, num_frames=16,
                       img_size=56, plan="msa")
    torch.save(teacher.state_dict(), tmp_path / "msa.pt")
    cli = main(["--config", str(ROOT / "configs" / "convert" / "video_demo_hydra_dwc3.yaml"),
                f"--model.init_args.source={tmp_path / 'msa.pt'}", f"--data.init_args.root={tiny_kinetics}",
                "--data.init_args.num_classes=2", f"--trainer.default_root_dir={tmp_path}",
                f"--model.init_args.output={tmp_path / 'out.pth'}"], run=False)
    assert isinstance(cli.model, ConversionTask)


def test_the_task_images_conversion_config_instantiates(tmp_path):
    """configs/convert/dinov2_s14_task_images.yaml takes a task config's training images (labels never
    read) and holds out every 10th for the conversion's own error; its backbone is the DINOv2 ViT-S/14."""
    import torch
    import yaml

    from hydra_dense.backbones import ViT
    from hydra_dense.cli import main
    from hydra_dense.conversion import ConversionTask

    from tests.helpers.images import make_ade

    make_ade(tmp_path / "ade", n_train=20, n_val=2)
    task = yaml.safe_load((ROOT / "configs" / "segmentation" / "demo_digits.yaml").read_text())
    task["model"]["init_args"]["backbone"] = str(ROOT / "configs" / "backbones" / "vit_s14_dinov2_msa.yaml")
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(task))
    teacher = ViT("small", patch_size=14, img_size=518, init_values=1e-5, plan="msa")
    torch.save({f"backbone.{k}": v for k, v in teacher.state_dict().items()}, tmp_path / "msa_run.pt")
    cli = main(["--config", str(ROOT / "configs" / "convert" / "dinov2_s14_task_images.yaml"),
                f"--model.init_args.source={tmp_path / 'msa_run.pt'}", f"--data.init_args.task_config={tmp_path / 'task.yaml'}",
                f"--data.init_args.task_overrides=[\"--data.init_args.root={tmp_path / 'ade'}\"]",
                f"--trainer.default_root_dir={tmp_path}", f"--model.init_args.output={tmp_path / 'out.pth'}"], run=False)
    assert isinstance(cli.model, ConversionTask) and cli.model.student_labels == ["hydra+dwc7"] * 12
    assert cli.datamodule.describe().endswith("18 train / 2 val images, crops 112px")


def test_a_task_is_built_from_a_config_and_overrides_without_running(tmp_path):
    """cli.build_task: the library's one way to build a task from a config; overrides apply, nothing trains."""
    import yaml

    from hydra_dense.cli import build_task
    from hydra_dense.tasks import SegmentationTask
    from tests.helpers.compare_runs import compare_seg_config

    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(compare_seg_config(tmp_path)))
    built = build_task(config, ["--model.init_args.backbone.init_args.plan=hydra", "--trainer.max_steps=7"],
                       root_dir=tmp_path / "run")
    assert isinstance(built.model, SegmentationTask) and built.trainer.max_steps == 7
    assert built.model.backbone.attention_kinds == ["hydra", "hydra"]
    assert built.trainer.global_step == 0 and built.trainer.default_root_dir == str(tmp_path / "run")
    assert built.datamodule is not None
