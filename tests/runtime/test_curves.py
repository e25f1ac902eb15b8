"""Training curves: a Lightning metrics.csv read back by hand-made rows, and the figure written."""
from hydra_dense.runtime.curves import curve_layout, main_metric, plot_curves, read_metrics
from tests.helpers.images import assert_drawn

CSV = """epoch,step,train_loss,val_mIoU,val_pixel_acc
0,0,2.5,,
0,1,2.0,,
0,1,,0.25,0.5
1,3,1.5,,
1,3,,0.40,nan
"""


def test_read_metrics_keeps_each_column_with_its_steps(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(CSV)
    series = read_metrics(path)
    assert series["train_loss"] == [(0, 2.5), (1, 2.0), (3, 1.5)]
    assert series["val_mIoU"] == [(1, 0.25), (3, 0.40)]
    assert series["val_pixel_acc"] == [(1, 0.5)]  # empty cells and NaN are skipped
    assert main_metric(series) == "val_mIoU"
    assert main_metric({"val_loss": [(0, 1.0)]}) == "val_loss" and main_metric({"train_loss": []}) is None


def test_runs_are_drawn_a_recipes_seeds_together_and_nothing_to_draw_is_none(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(CSV)
    runs = {"msa seed 0": read_metrics(path), "msa seed 1": read_metrics(path), "hydra seed 0": read_metrics(path)}
    panels, recipes = curve_layout(runs)
    assert panels == ["train_loss", "val_mIoU"]  # the loss, and the main validation metric
    assert recipes == {"msa": ["msa seed 0", "msa seed 1"], "hydra": ["hydra seed 0"]}  # one colour, one legend entry each
    out = plot_curves(runs, tmp_path / "curves.png", "title")
    assert out == tmp_path / "curves.png"
    assert_drawn(out)
    assert plot_curves({"x": {"epoch_time": [(0, 1.0)]}}, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()
