"""The GPU track's command (its CPU dry run, ``python tools/gpu_track.py --dry-run``, takes about 8
minutes on 2 cores: run by hand, not in the suite)."""
from hydra_dense.jobs.gpu_track import GPU_TRACK_PLANS, comparison_arguments


def test_the_full_scale_command_is_three_seeds_of_1000_steps_in_bf16():
    args = comparison_arguments(False, "runs/x", [])
    assert args[args.index("--seeds") + 1] == "0,1,2" and args[args.index("--max-steps") + 1] == "1000"
    assert "--trainer.precision=bf16-mixed" in args and args[args.index("--plans") + 1] == GPU_TRACK_PLANS
