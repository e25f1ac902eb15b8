"""The comparison's converted recipes: @converted (once, cached), the video demo's conversion of its
own MSA run, @from_msa / msa@continued from each seed's MSA run."""
import csv
import json

import pytest
import yaml

from hydra_dense.comparison.command import main as compare_main
from tests.helpers.compare_runs import TRAINER, compare_seg_config


def test_converted_recipe_runs_the_conversion_once_and_caches_it(tmp_path, monkeypatch):
    import torch

    from hydra_dense.backbones import ViT
    from tests.helpers.images import make_images

    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "msa.pth"
    torch.manual_seed(0)
    torch.save(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32).state_dict(), source)
    images = make_images(tmp_path / "unlabeled", n=8)
    conv = tmp_path / "convert.yaml"
    conv.write_text(yaml.safe_dump({"trainer": {"accelerator": "cpu", "enable_progress_bar": False,
                                                "num_sanity_val_steps": 0, "val_check_interval": 2,
                                                "check_val_every_n_epoch": None},
                                    "model": {"class_path": "hydra_dense.conversion.ConversionTask",
                                              "init_args": {"backbone": {"class_path": "hydra_dense.backbones.ViT",
                                                                         "init_args": {"size": "tiny", "plan": {
                                                                             "default": "hydra", "local": "dwc3"}}},
                                                            "lr": 3e-3, "warmup_steps": 1}},
                                    "data": {"class_path": "hydra_dense.conversion.ConversionImages",
                                             "init_args": {"root": str(images), "crop_size": 32, "batch_size": 4,
                                                           "val_batch_size": 4, "num_workers": 0, "val_every": 4}}}))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(compare_seg_config(tmp_path)))
    args = ["--config", str(cfg), "--pretrained", str(source), "--plans", "hydra,hydra+dwc3@converted,hydra@converted",
            "--convert-config", str(conv), "--convert-steps", "4", "--speed-size", "0", "--speed-repeats", "2"]
    assert compare_main([*args, "--out", str(tmp_path / "one")]) == 0
    rows = {r["plan"]: r for r in csv.DictReader((tmp_path / "one" / "table.csv").open())}
    conv_row = rows["hydra+dwc3@converted"]
    assert float(conv_row["convert_min"]) > 0 and "->" in conv_row["convert_error"]
    assert rows["hydra"]["convert_min"] == "" and conv_row["attention"] == "hydra+dwc3 x2"
    # the conversion config's own plan has local: dwc3; the recipe's plan (none) is what gets converted
    assert rows["hydra@converted"]["attention"] == "hydra x2"
    cached = sorted((tmp_path / "cache" / "converted").glob("*/converted.pth"))
    assert len(cached) == 2 and all(c.with_name("converted_errors.md").is_file() for c in cached)
    stamps = [c.stat().st_mtime for c in cached]
    assert compare_main([*args, "--out", str(tmp_path / "two")]) == 0
    assert [c.stat().st_mtime for c in cached] == stamps, "the second comparison reused the converted checkpoints"
    # a cached checkpoint cut short (a full disk, a killed copy) is converted again, not reused and failed on
    cached[0].write_bytes(cached[0].read_bytes()[:1000])
    assert compare_main([*args, "--out", str(tmp_path / "three")]) == 0
    assert torch.load(cached[0], weights_only=True) and cached[0].stat().st_mtime > stamps[0]


@pytest.fixture
def fake_conversions(tmp_path, monkeypatch):
    """converted_checkpoint with the conversion worker replaced by one that writes a checkpoint at
    once, and natural images that exist only once prepared (as on a fresh machine). Returns the
    cache module, the conversion config, its source weights, a backbone and the list of conversions run."""
    import subprocess
    from types import SimpleNamespace

    import torch

    from hydra_dense.conversion import cache as conversion
    from hydra_dense.data import natural_images

    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    images = tmp_path / "cache" / "data" / "natural_images"

    def prepare(root=None):  # stands in for unpacking the image wheels; the conversion CLI calls it too
        for split in ("train", "val"):
            (images / split).mkdir(parents=True, exist_ok=True)
            image = images / split / "0.jpg"
            if not image.is_file():  # rewritten, its time would change the data fingerprint
                image.write_bytes(b"jpeg")
        return images

    conversions = []

    def fake_conversion(cmd, **_):
        prepare()
        from hydra_dense.conversion.request import ConversionRequest

        output = ConversionRequest.read(cmd[-1]).output  # the worker's one argument: its request file
        torch.save({"hydra_dense": dict(converted_blocks=[0], steps=4, data="images", error_before=[1.0],
                                        error_after=[0.5])}, output)
        conversions.append(output)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(natural_images, "prepare", prepare)
    monkeypatch.setattr(conversion.subprocess, "run", fake_conversion)
    source = tmp_path / "msa.pth"
    source.write_bytes(b"weights")
    conv = tmp_path / "convert.yaml"
    conv.write_text(yaml.safe_dump({"trainer": {"max_steps": 4}, "data": {"init_args": {
        "root": str(images / "train"), "val_root": str(images / "val")}}}))
    backbone = {"class_path": "hydra_dense.backbones.ViT", "init_args": {"size": "tiny"}}
    return SimpleNamespace(cache=conversion, config=conv, source=str(source), backbone=backbone, runs=conversions)


def test_conversion_cache_key_is_taken_after_the_conversion_data_is_prepared(fake_conversions):
    """On a fresh machine the default conversion's images do not exist until prepared: the first run's
    checkpoint must be cached under the key every later run computes (a second call converts nothing)."""
    f = fake_conversions
    first, info = f.cache.converted_checkpoint(f.backbone, {"default": "hydra"}, f.source, str(f.config), None)
    assert not info["cached"] and len(f.runs) == 1
    again, info = f.cache.converted_checkpoint(f.backbone, {"default": "hydra"}, f.source, str(f.config), None)
    assert info["cached"] and again == first and len(f.runs) == 1


def test_a_conversion_is_reused_whatever_its_configs_comments_or_key_order_and_redone_for_a_new_value(
        fake_conversions):
    f = fake_conversions
    convert = lambda: f.cache.converted_checkpoint(f.backbone, {"default": "hydra"}, f.source, str(f.config), None)  # noqa: E731
    first, _ = convert()
    config = yaml.safe_load(f.config.read_text())
    f.config.write_text("# the same conversion, commented, keys in another order\n" +
                        yaml.safe_dump(dict(reversed(list(config.items()))), sort_keys=False))
    again, info = convert()
    assert info["cached"] and again == first and len(f.runs) == 1
    config["trainer"]["max_steps"] = 5
    f.config.write_text(yaml.safe_dump(config))
    other, info = convert()
    assert not info["cached"] and other != first and len(f.runs) == 2


def test_a_conversion_cached_under_its_configs_raw_text_key_is_reused(fake_conversions):
    """Caches on disk may be keyed by the config's raw text: the first 16 hex digits of the sha1 of the
    sorted JSON of source digest, backbone (with the plan), config text, steps, extra arguments and
    data fingerprint. Such a folder is reused, not converted again."""
    import hashlib
    import json
    import shutil

    f = fake_conversions
    plan = {"default": "hydra"}
    first, _ = f.cache.converted_checkpoint(f.backbone, plan, f.source, str(f.config), None)
    text = f.config.read_text()
    stored = hashlib.sha1(json.dumps(dict(
        source=hashlib.sha1(open(f.source, "rb").read()).hexdigest(),
        backbone=f.cache._conversion_backbone(f.backbone, plan), config=text, steps=4, extra=[],
        data=f.cache._data_fingerprint(text, [])), sort_keys=True).encode()).hexdigest()[:16]
    assert stored != first.parent.name
    shutil.move(first.parent, first.parent.with_name(stored))
    kept, info = f.cache.converted_checkpoint(f.backbone, plan, f.source, str(f.config), None)
    assert info["cached"] and kept.parent.name == stored and len(f.runs) == 1


def test_converted_video_recipe_converts_the_comparisons_own_msa_run(tmp_path, monkeypatch):
    """A task trained from scratch (no pretrained image ViT) converts the comparison's own MSA run
    of the first seed; its data are the task's clips, labels unused."""
    pytest.importorskip("av")
    import torch

    from hydra_dense.data.demo_video import prepare

    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    root = prepare(tmp_path / "clips", n_train=8, n_val=4, n_frames=8, size=32)
    backbone = {"class_path": "hydra_dense.backbones.VideoViT", "init_args": {
        "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 8, "num_frames": 8, "img_size": 32}}
    data = {"class_path": "hydra_dense.data.VideoDataModule", "init_args": {
        "root": str(root), "num_classes": 4, "num_frames": 8, "frame_stride": 1, "size": 32, "short_side": 32,
        "batch_size": 4, "val_batch_size": 4, "num_workers": 0}}
    cfg, conv = tmp_path / "cfg.yaml", tmp_path / "convert.yaml"
    cfg.write_text(yaml.safe_dump({"seed_everything": 0, "trainer": TRAINER, "data": data, "model": {
        "class_path": "hydra_dense.tasks.VideoClassificationTask",
        "init_args": {"backbone": backbone, "num_classes": 4, "warmup_steps": 1}}}))
    conv.write_text(yaml.safe_dump({
        "trainer": {"accelerator": "cpu", "enable_progress_bar": False, "num_sanity_val_steps": 0},
        "model": {"class_path": "hydra_dense.conversion.ConversionTask",
                  "init_args": {"backbone": backbone, "lr": 3e-3, "warmup_steps": 1}},
        "data": data}))
    args = ["--config", str(cfg), "--pretrained", "none", "--convert-config", str(conv), "--convert-steps", "2",
            "--speed-size", "0", "--speed-repeats", "2"]
    with pytest.raises(ValueError, match="list msa first in --plans"):
        compare_main([*args, "--plans", "hydra,hydra@converted", "--out", str(tmp_path / "bad")])
    assert compare_main([*args, "--plans", "msa,hydra+dwc3@converted", "--out", str(tmp_path / "out")]) == 0
    (checkpoint,) = (tmp_path / "cache" / "converted").glob("*/converted.pth")
    meta = torch.load(checkpoint, map_location="cpu", weights_only=True)["hydra_dense"]
    assert meta["source"] == str(tmp_path / "out" / "msa" / "seed0" / "final_weights.pt")
    row = list(csv.DictReader((tmp_path / "out" / "table.csv").open()))[1]
    assert row["plan"] == "hydra+dwc3@converted" and row["attention"] == "hydra+dwc3 x2"
    assert "8 train / 4 val clips" in row["convert_data"] and "labels unused" in row["convert_data"]
    # the converted recipe's task head starts from the MSA run's: the features it was converted to imitate
    from hydra_dense.comparison.worker import load_task_head

    request = json.loads((tmp_path / "out" / "hydra+dwc3@converted" / "seed0" / "request.json").read_text())
    assert request["head_from"] == meta["source"]
    msa = torch.load(meta["source"], map_location="cpu", weights_only=True)
    model = torch.nn.Module()
    model.backbone = torch.nn.Linear(2, 2)
    model.fc_norm, model.head = torch.nn.LayerNorm(32), torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(32, 4))
    assert sorted(load_task_head(model, meta["source"])) == ["fc_norm.bias", "fc_norm.weight", "head.1.bias",
                                                             "head.1.weight"]
    assert torch.equal(model.head[1].weight, msa["head.1.weight"])
    model.extra = torch.nn.Linear(2, 2)
    with pytest.raises(KeyError, match="lack extra.weight"):
        load_task_head(model, meta["source"])


def test_from_msa_recipes_convert_each_seeds_msa_run_on_the_task_images(tmp_path, monkeypatch):
    """@from_msa: the msa run of each seed is converted (on the comparison's own training images, held
    out by every val_every-th image) and fine-tuned with its head; msa@continued trains that run again."""
    import torch

    from hydra_dense.backbones import ViT
    from hydra_dense.comparison.recipes import parse_recipes

    with pytest.raises(ValueError, match="list msa first"):
        parse_recipes("hydra,hydra@from_msa")
    with pytest.raises(ValueError, match="only msa@continued"):
        parse_recipes("msa,hydra@continued")
    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "msa.pth"
    torch.manual_seed(0)
    torch.save(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32).state_dict(), source)
    # the task's data root is given only as an override: the conversion's images must come from there too
    config = compare_seg_config(tmp_path)
    data_root = config["data"]["init_args"]["root"]
    config["data"]["init_args"]["root"] = str(tmp_path / "not_here")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(config))
    conv = tmp_path / "convert.yaml"
    conv.write_text(yaml.safe_dump({
        "trainer": {"accelerator": "cpu", "enable_progress_bar": False, "num_sanity_val_steps": 0,
                    "val_check_interval": 2, "check_val_every_n_epoch": None},
        "model": {"class_path": "hydra_dense.conversion.ConversionTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {"size": "tiny"}},
            "lr": 3e-3, "warmup_steps": 1}},
        "data": {"class_path": "hydra_dense.conversion.ConversionImages", "init_args": {
            "task_config": "placeholder.yaml", "val_every": 4, "crop_size": 32, "batch_size": 4,
            "val_batch_size": 4, "num_workers": 0}}}))
    out = tmp_path / "out"
    assert compare_main(["--config", str(cfg), "--pretrained", str(source), "--plans",
                         "msa,hydra+win2@from_msa,msa@continued", "--seeds", "0,1", "--from-msa-convert-config",
                         str(conv), "--convert-steps", "2", "--speed-size", "0", "--speed-repeats", "2", "--out",
                         str(out), f"--data.init_args.root={data_root}"]) == 0
    checkpoints = sorted((tmp_path / "cache" / "converted").glob("*/converted.pth"))
    sources = sorted(torch.load(c, map_location="cpu", weights_only=True)["hydra_dense"]["source"] for c in checkpoints)
    assert sources == [str(out / "msa" / f"seed{s}" / "final_weights.pt") for s in (0, 1)]
    for seed in (0, 1):
        msa = str(out / "msa" / f"seed{seed}" / "final_weights.pt")
        req = json.loads((out / "hydra+win2@from_msa" / f"seed{seed}" / "request.json").read_text())
        assert req["head_from"] == msa and req["seed"] == seed
        meta = torch.load(req["converted"], map_location="cpu", weights_only=True)["hydra_dense"]
        assert meta["source"] == msa and "train split, labels unused" in meta["data"]
        assert "6 train / 2 val images" in meta["data"]  # 8 training images, every 4th held out
        cont = json.loads((out / "msa@continued" / f"seed{seed}" / "request.json").read_text())
        assert cont["converted"] == cont["head_from"] == msa
    rows = {r["plan"]: r for r in csv.DictReader((out / "table.csv").open())}
    assert rows["hydra+win2@from_msa"]["attention"] == "hydra+win2 x2" and rows["msa@continued"]["attention"] == "msa x2"
    assert "teacher: the msa run of each seed (2 conversions" in rows["hydra+win2@from_msa"]["convert_data"]
    assert float(rows["hydra+win2@from_msa"]["convert_min"]) > 0 and rows["msa@continued"]["convert_min"] == ""
