"""The README and docs/ name only files that exist, and every shipped YAML builds."""
import glob
import re

import pytest
import yaml

from tests.helpers.tiny_runs import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a repository path: configs/..., tools/..., docs/..., hydra_dense/... (globs allowed)
PATH = re.compile(r"(?<![\w/.~-])((?:configs|tools|docs|hydra_dense)/[\w*./-]*[\w*/])")


def test_readme_is_a_front_page_linking_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    assert "./run.sh demo" in text and "./run.sh test" in text
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page):
    named = {m.group(1) for m in PATH.finditer(page.read_text())}
    assert named, f"{page.name} names no repository path"
    missing = sorted(p for p in named if not glob.glob(str(ROOT / p)))
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_relative_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: link {target} is broken"


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


VIDEO = sorted((ROOT / "configs" / "video").glob("*.yaml"))


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
    from hydra_dense.convert import ConversionTask

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
    from hydra_dense.convert import ConversionTask

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
