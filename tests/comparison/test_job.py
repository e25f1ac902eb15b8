"""The main job end to end on tiny configs: every plan trained the same way, one table out."""
import csv
import json
from pathlib import Path

import pytest
import yaml

from hydra_dense.comparison.command import main as compare_main
from tests.helpers.compare_runs import TRAINER, compare_seg_config, run_compare
from tests.helpers.images import assert_drawn, make_ade


def _run(tmp_path, config: dict, extra=(), plans=("msa", "hybrid1", "hydra")):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    assert compare_main(["--config", str(cfg), "--plans", ",".join(plans), "--pretrained", "none",
                         "--out", str(out), "--speed-repeats", "2", *extra]) == 0
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [r["plan"] for r in rows] == list(plans)
    if "hybrid1" in plans:
        assert rows[plans.index("hybrid1")]["attention"] == "msa@[0], hydra@[1]"
    for r in rows:
        assert 0 <= float(r["score"]) <= 100 and float(r["train_img_s"]) > 0 and float(r["infer_img_s"]) > 0
    assert_drawn(out / "accuracy_vs_speed.png")
    assert_drawn(out / "curves.png")  # every run's curves overlaid
    table = (out / "table.md").read_text()
    assert all(f"| {plan} |" in table for plan in plans)
    if "msa" in plans:  # read against MSA under the table, and kept in summary.json
        reading = json.loads((out / "summary.json").read_text())["reading"]
        assert reading and "**What this table says:**" in table and all(s in table for s in reading)
    _check_html_report(out, plans, overlays="Video" not in config["model"]["class_path"])  # video: no overlays
    for plan in plans:  # and each run's own, next to its metrics.csv
        assert [p.parent for p in (out / plan).rglob("curves.png")] == [p.parent for p in (out / plan).rglob("metrics.csv")]
        for metrics in (out / plan).rglob("metrics.csv"):  # TensorBoard's events in the same folder
            assert list(metrics.parent.glob("events.out.tfevents.*"))
    return rows


def _check_html_report(out, plans, overlays: bool):
    """One self-contained page: the table, both plots and each plan's overlays, all inlined."""
    import base64
    import html.parser

    page = (out / "report.html").read_text()
    images = []

    class Images(html.parser.HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "img":
                images.append(dict(attrs))
    Images().feed(page)
    assert all(i["src"].startswith("data:image/png;base64,") for i in images)
    assert all(base64.b64decode(i["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    alts = [i["alt"] for i in images]
    assert "Accuracy vs speed" in alts and "Training curves" in alts
    for plan in plans:
        assert f"<td>{plan}</td>" in page, plan
        assert any(a.startswith(f"{plan} ") for a in alts) == overlays, plan
    assert "src=\"http" not in page and "href=" not in page  # nothing fetched from elsewhere


def test_compare_segmentation(tmp_path):
    root = make_ade(tmp_path / "data", n_train=8, n_val=2)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.SegmentationTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 4, "img_size": 32,
                "out_indices": [0, 1]}},
            "num_classes": 4, "decode_head": "uper", "head_channels": 16, "warmup_steps": 1}},
        "data": {"class_path": "hydra_dense.data.SegmentationDataModule", "init_args": {
            "root": str(root), "num_classes": 4, "crop_size": [32, 32], "batch_size": 4, "val_batch_size": 2,
            "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "64"])
    assert rows[0]["metric"] == "val_mIoU" and rows[0]["metric2"] == "val_pixel_acc"
    assert float(rows[0]["flop_ideal_big"]) == 1.0 and float(rows[2]["flop_ideal_big"]) > 1.0
    assert "| class_0 |" in (tmp_path / "out" / "per_class.md").read_text()


def test_compare_video(tmp_path):
    pytest.importorskip("av")
    from hydra_dense.data.demo_video import prepare

    root = prepare(tmp_path / "clips", n_train=8, n_val=4, n_frames=8, size=32)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.VideoClassificationTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.VideoViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 8, "num_frames": 8,
                "img_size": 32}},
            "num_classes": 4, "warmup_steps": 1}},
        "data": {"class_path": "hydra_dense.data.VideoDataModule", "init_args": {
            "root": str(root), "num_classes": 4, "num_frames": 8, "frame_stride": 1, "size": 32, "short_side": 32,
            "batch_size": 4, "val_batch_size": 4, "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "8x64x64"])
    assert rows[0]["metric"] == "val_top1" and rows[0]["metric2"] == "val_top4"


def test_compare_detection(tmp_path):
    from hydra_dense.data.demo_instances import prepare

    root = prepare(tmp_path / "inst", n_train=8, n_val=4, size=80)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.DetectionTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 16, "img_size": 64,
                "class_token": False, "out_indices": [1]}},
            "num_classes": 10, "detector": "mask_rcnn", "pyramid_channels": 16, "min_size": 64, "max_size": 64,
            "resize_train": True, "warmup_steps": 1, "score_thresh": 0.0}},
        "data": {"class_path": "hydra_dense.data.DetectionDataModule", "init_args": {
            "root": str(root), "train_json": "annotations/instances_train.json",
            "val_json": "annotations/instances_val.json", "train_images": "train", "val_images": "val",
            "masks": True, "batch_size": 4, "val_batch_size": 2, "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "128"], plans=("msa", "hydra"))  # hybrids: the other tasks
    assert rows[0]["metric"] == "val_mAP" and rows[0]["metric2"] == "val_mAP_50"
    # the big input is timed at its own size (not resized to the 64-px evaluation size): Hydra's FLOPs differ
    assert float(rows[1]["flop_ideal_big"]) > 1.0
    assert "| digit_0 |" in (tmp_path / "out" / "per_class.md").read_text()
    # the evaluation-size speed is labelled with the size the detector runs at, not the 80-px input
    assert "batch 2, 80x80, resized by the detector to short side 64" in (tmp_path / "out" / "table.md").read_text()


def test_seeds_are_honoured_and_reported_as_mean_and_std(tmp_path):
    """--seed / --seeds reach seed_everything: the same seed twice gives the same score, two seeds differ."""
    config = compare_seg_config(tmp_path, steps=6, lr=3e-3)
    runs = run_compare(tmp_path, config, "two", "--plans", "hydra", "--seeds", "0,1")
    again = run_compare(tmp_path, config, "again", "--plans", "hydra", "--seed", "0")
    by_seed = {int(r["seed"]): float(r["score"]) for r in runs}
    assert by_seed[0] == float(again[0]["score"])
    assert by_seed[0] != by_seed[1]
    row = next(csv.DictReader((tmp_path / "two" / "table.csv").open()))
    assert row["seeds"] == "0,1" and abs(float(row["score"]) - (by_seed[0] + by_seed[1]) / 2) < 1e-6
    assert float(row["score_std"]) > 0 and "±" in (tmp_path / "two" / "table.md").read_text()
    # a second identical command reuses the finished runs instead of training again
    assert run_compare(tmp_path, config, "two", "--plans", "hydra", "--seeds", "0,1") == runs


def test_eval_sizes_score_every_run_on_more_tokens_and_fill_in_reused_runs(tmp_path):
    """--eval-sizes validates each run again with resized validation images; at the images' own size
    (32) that is the native score, and a later comparison adds a new size from the saved weights."""
    from hydra_dense.comparison.request import RunRequest

    config = compare_seg_config(tmp_path)
    cfg = tmp_path / "key.yaml"
    cfg.write_text("x: 1")
    req = RunRequest("hydra", 0, str(cfg))  # a run requested before eval sizes existed
    assert RunRequest("hydra", 0, str(cfg), eval_sizes=[224], save_weights=True).identity() == req.identity()
    run_compare(tmp_path, config, "out", "--plans", "hydra", "--seeds", "0,1", "--eval-sizes", "32")
    results = [json.loads((tmp_path / "out" / "hydra" / f"seed{s}" / "result.json").read_text()) for s in (0, 1)]
    assert all(abs(r["scores_at"]["32"] - r["score"]) < 1e-6 for r in results)
    stamps = [Path(r["weights"]).stat().st_mtime for r in results]
    run_compare(tmp_path, config, "out", "--plans", "hydra", "--seeds", "0,1", "--eval-sizes", "32,64")
    again = [json.loads((tmp_path / "out" / "hydra" / f"seed{s}" / "result.json").read_text()) for s in (0, 1)]
    assert [Path(r["weights"]).stat().st_mtime for r in again] == stamps, "reused, not trained again"
    assert all(set(r["scores_at"]) == {"32", "64"} and 0 <= r["scores_at"]["64"] <= 100 for r in again)
    assert all(a["scores_at"]["64"] != a["score"] for a in again)  # 4x the tokens: another score
    (row,) = csv.DictReader((tmp_path / "out" / "table.csv").open())
    assert float(row["score_at_64"]) == pytest.approx(sum(r["scores_at"]["64"] for r in again) / 2)
    assert "score_at_64" in (tmp_path / "out" / "table.md").read_text()


def test_peak_memory_does_not_depend_on_plan_order(tmp_path):
    config = compare_seg_config(tmp_path)
    first = {r["recipe"]: float(r["peak_train_mem_mb"]) for r in run_compare(tmp_path, config, "ab", "--plans", "msa,hydra")}
    second = {r["recipe"]: float(r["peak_train_mem_mb"]) for r in run_compare(tmp_path, config, "ba", "--plans", "hydra,msa")}
    for plan in ("msa", "hydra"):
        assert first[plan] > 0 and abs(first[plan] - second[plan]) <= 0.25 * max(first[plan], second[plan]), (first, second)


def test_list_plans_names_are_all_accepted(capsys):
    from hydra_dense.comparison.recipes import parse_recipes

    assert compare_main(["--list-plans"]) == 0
    names = capsys.readouterr().out.split()
    assert {"msa", "hydra+dwc3", "hybrid4+dwc5", "hybrid8", "hydra+dwc3@converted", "aft", "polynl+dwc7",
            "aft+dwc7@converted"} <= set(names)
    concrete = [n for n in names if "<" not in n]
    assert [r.name for r in parse_recipes(",".join(concrete))] == concrete
    with pytest.raises(ValueError, match="unknown local mixing 'dwc4x'"):
        parse_recipes("hydra+dwc4x")
    with pytest.raises(ValueError, match="conversion needs a plan with non-MSA blocks"):
        parse_recipes("msa@converted")


def test_pareto_front_and_mean_std_aggregation():
    from hydra_dense.comparison.report import aggregate, pareto_front

    # (speed, score): the second is beaten on both axes by the third
    assert pareto_front([(1.0, 50.0), (1.5, 30.0), (2.0, 40.0), (2.5, 10.0)]) == [0, 2, 3]
    runs = [dict(recipe="a", seed=s, attention="msa x2", metric="val_mIoU", metric2="", score=v, score2=0.0,
                 train_img_s=1.0, peak_train_mem_mb=10.0, params_m=1.0, gflops_img=1.0, steps=3, train_min=0.1)
            for s, v in ((0, 40.0), (1, 44.0), (2, 48.0))]
    (row,) = aggregate(runs, {})
    assert row["score"] == 44.0 and row["score_std"] == 4.0 and row["seeds"] == "0,1,2"


def test_default_plans_show_the_converted_recipe_only_where_weights_can_be_converted():
    from hydra_dense.comparison.command import DEFAULT_PLANS, DEMO_PLANS, VIDEO_DEMO_PLANS, parse_args

    assert "@converted" in DEMO_PLANS and "@converted" not in DEFAULT_PLANS
    assert parse_args([])[0].plans == DEMO_PLANS
    assert parse_args(["--pretrained", "none"])[0].plans == DEFAULT_PLANS
    # the video demo converts its own MSA run, which its default plans train first
    video = parse_args(["--config", "configs/video/demo_moving_digits.yaml"])[0].plans
    assert video == VIDEO_DEMO_PLANS and video.startswith("msa,") and "@converted" in video
    assert parse_args(["--config", "configs/detection/demo_trees.yaml"])[0].plans == DEFAULT_PLANS
    # the digit detection demo starts from the DINOv2 weights too, so it shows the converted recipe
    assert parse_args(["--config", "configs/detection/demo_digits.yaml"])[0].plans == DEMO_PLANS
    assert parse_args(["--config", "configs/detection/demo_digits.yaml", "--pretrained", "none"])[0].plans \
        == DEFAULT_PLANS
    # ... converted on crops with the detection demo's token count; other configs keep the default
    from hydra_dense.comparison.command import DETECTION_CONVERT_CONFIG

    assert parse_args(["--config", "configs/detection/demo_digits.yaml"])[0].convert_config == DETECTION_CONVERT_CONFIG
    assert parse_args(["--config", "configs/detection/demo_digits.yaml", "--convert-config", "x.yaml"])[0] \
        .convert_config == "x.yaml"
    assert parse_args(["--config", "configs/detection/demo_trees.yaml"])[0].convert_config is None
    assert parse_args(["--plans", "msa,hydra"])[0].plans == "msa,hydra"


def test_convert_args_are_split_as_a_shell_splits_them():
    """A quoted value (a JSON list, a path with spaces) stays one conversion argument; unbalanced
    quotes are refused naming the option."""
    import pytest

    from hydra_dense.comparison.command import parse_args

    options = parse_args(["--convert-args", "--trainer.max_steps=5 '--data.init_args.extra=[\"/my data/a\", \"b\"]'"])[0]
    assert options.convert_args == ["--trainer.max_steps=5", '--data.init_args.extra=["/my data/a", "b"]']
    with pytest.raises(SystemExit):
        parse_args(["--convert-args", "--x='unclosed"])




def test_the_controls_get_what_zeroing_their_global_term_costs(tmp_path):
    """The large-token track's rows: local-only and ViTDet beside Hydra with a local branch. Rows with
    a global term next to local mixing get ``global_zeroed`` (the score with it zeroed) and
    ``global_cost`` (per seed, score - zeroed); MSA and local-only have no such term."""
    config = compare_seg_config(tmp_path)
    config["model"]["init_args"]["backbone"]["init_args"].update(depth=8, out_indices=[3, 7])
    plans = ("msa", "local+dwc3", "hydra+mean+gain+dwc3", "vitdet2_msa")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    assert compare_main(["--config", str(cfg), "--plans", ",".join(plans), "--pretrained", "none", "--out", str(out),
                         "--speed-repeats", "2", "--speed-size", "0", "--seeds", "0,1"]) == 0
    rows = {r["plan"]: r for r in csv.DictReader((out / "table.csv").open())}
    assert rows["local+dwc3"]["attention"] == "local+dwc3 x8"
    assert rows["vitdet2_msa"]["attention"] == "window@[0, 2, 4, 6], msa@[1, 3, 5, 7]"
    for plan in ("msa", "local+dwc3"):
        assert rows[plan]["global_zeroed"] == "" and rows[plan]["global_cost"] == ""
    runs = list(csv.DictReader((out / "runs.csv").open()))
    for plan in ("hydra+mean+gain+dwc3", "vitdet2_msa"):
        per_seed = [float(r["score"]) - float(r["score_global_zeroed"]) for r in runs if r["recipe"] == plan]
        assert len(per_seed) == 2
        assert float(rows[plan]["global_cost"]) == pytest.approx(sum(per_seed) / 2, abs=1e-6)
    assert float(rows["msa"]["speedup"]) == 1.0 and float(rows["local+dwc3"]["flop_ideal"]) > 0
    assert "global_cost" in (out / "table.md").read_text()


def test_another_segmentation_config_on_the_dinov2_backbone_gets_the_recipe_and_its_local_only_control(tmp_path):
    import yaml

    from hydra_dense.comparison.command import CONVERTIBLE_PLANS, DEFAULT_PLANS, parse_args
    from hydra_dense.runtime.shipped import find_shipped

    config = yaml.safe_load(find_shipped("configs/segmentation/demo_digits_large.yaml").read_text())
    config["data"]["init_args"]["root"] = str(tmp_path / "held_out")
    own = tmp_path / "own.yaml"
    own.write_text(yaml.safe_dump(config))
    assert parse_args(["--config", str(own)])[0].plans == CONVERTIBLE_PLANS
    assert CONVERTIBLE_PLANS.split(",") == ["msa", "hydra+mean+dwc7@converted", "local+dwc7@converted"]
    assert parse_args(["--config", str(own), "--pretrained", "none"])[0].plans == DEFAULT_PLANS
    config["model"]["init_args"]["backbone"] = "../backbones/vit_b16_msa.yaml"  # no weights to convert
    own.write_text(yaml.safe_dump(config))
    assert parse_args(["--config", str(own)])[0].plans == DEFAULT_PLANS


def test_the_table_says_what_the_head_s_global_pool_carries_and_the_score_near_and_far_from_the_cue():
    from hydra_dense.comparison.report import aggregate

    runs = [dict(recipe="a", seed=s, attention="msa x2", metric="val_mIoU", metric2="", score=v, score2=0.0,
                 score_head_pool_zeroed=z, score_near=n, score_far=f, train_img_s=1.0, peak_train_mem_mb=10.0,
                 params_m=1.0, gflops_img=1.0, steps=3, train_min=0.1)
            for s, v, z, n, f in ((0, 40.0, 30.0, 50.0, 35.0), (1, 44.0, 40.0, 52.0, 41.0))]
    (row,) = aggregate(runs, {})
    assert row["head_pool_cost"] == 7.0 and row["head_pool_zeroed"] == 35.0
    assert row["score_near"] == 51.0 and row["score_far"] == 38.0
    assert "global_cost" not in row  # no run had a global term to zero


def test_steps_sizes_and_plans_that_cannot_run_are_refused_before_anything_trains(capsys):
    from hydra_dense.comparison.recipes import parse_recipes
    from hydra_dense.comparison.command import parse_args

    for argv, words in ((["--max-steps", "0"], "--max-steps 0: give 1 or more steps"),
                        (["--max-steps", "-1"], "--max-steps -1: give 1 or more steps"),
                        (["--convert-steps", "0"], "--convert-steps 0: give 1 or more steps"),
                        (["--speed-size", "7x"], "--speed-size: bad size '7x'")):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert words in capsys.readouterr().err
    assert parse_args([])[0].max_steps == 0  # left out: the config's own
    with pytest.raises(ValueError, match="'hybrid6' does not fit the task's backbone of depth 4"):
        parse_recipes("msa,hybrid6", depth=4)
