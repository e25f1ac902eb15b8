"""What the comparison prints: progress a person can follow, no known noise, options named when bad."""
import pytest

from tests.helpers.compare_runs import compare_seg_config, run_compare


def test_the_job_says_how_far_it_is_and_none_of_the_known_noise(tmp_path, capfd):
    """Run k of N with elapsed time and an ETA, the step of each run, each score when known, the
    recipe's mean ± std; none of Lightning's advice, tips or warnings the job causes itself."""
    config = compare_seg_config(tmp_path, steps=4, lr=3e-3)
    run_compare(tmp_path, config, "progress", "--plans", "hydra", "--seeds", "0,1")
    out = "".join(capfd.readouterr())
    assert "=== [hydra] seed 0: run 1/2 | elapsed " in out and "2 run(s) left ===" in out
    assert "=== [hydra] seed 1: run 2/2 | elapsed " in out and "1 run(s) left, ETA " in out
    assert "[hydra seed 0] step 4/4 | " in out and "[compare] hydra seed 1: val_mIoU " in out
    assert "[compare] hydra: val_mIoU " in out and " over 2 seed(s)" in out
    for noise in ("args parameter is intended", "Tip: For seamless", "exists and is not empty", "LeafSpec",
                  "Total Flops"):
        assert noise not in out, noise


def test_a_bad_seed_list_names_the_option(capsys):
    from hydra_dense.compare import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--seeds", "0,x"])
    assert "--seeds: expected comma-separated integers such as 0,1,2, got '0,x' ('x' is not an integer)" in \
        capsys.readouterr().err
