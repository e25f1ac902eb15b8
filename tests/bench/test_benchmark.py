"""The benchmark tool: --quick writes a valid CSV; FLOP accounting matches a hand count."""
import csv
import subprocess
import sys

import pytest
import torch
from torch import nn

from hydra_dense.backbones import ViT
from hydra_dense.bench.flops import count_flops
from hydra_dense.bench.backbone import attention_flop_shares
from hydra_dense.attention import plan_from_name, plan_names
from hydra_dense.bench.input_sizes import InputSize, parse_devices, parse_size
from tests.helpers.tiny_runs import ROOT
from tests.helpers.images import assert_drawn

REQUIRED = ["backbone", "attention", "height", "width", "frames", "tokens", "batch", "mode", "dtype", "ms_per_iter",
            "throughput", "peak_mem_mb", "gflops", "attn_flop_share"]


@pytest.mark.slow
def test_quick_mode_writes_a_valid_csv(tmp_path):
    out = tmp_path / "out.csv"
    plot = tmp_path / "plot.png"
    # --no-memory: peak memory (a fresh process per row) is checked once, below
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark.py"), "--quick", "--no-memory", "--csv",
                           str(out), "--plot", str(plot)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    assert set(REQUIRED) <= set(rows[0])
    assert {r["attention"] for r in rows} == {"msa", "hydra", "none", "hybrid2"}
    for r in rows:
        assert float(r["ms_per_iter"]) > 0 and float(r["throughput"]) > 0 and float(r["gflops"]) > 0
        assert int(r["tokens"]) == (int(r["height"]) // 16) * (int(r["width"]) // 16)
    msa = [r for r in rows if r["attention"] == "msa"]
    assert all(float(r["attn_flop_share"]) > 0 for r in msa)
    assert_drawn(plot)
    assert "| vit_micro | hydra |" in proc.stdout


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_backbone_rows_measure_peak_memory_in_a_fresh_process():
    from hydra_dense.bench.backbone import BenchSettings, bench_backbones

    small, large = (bench_backbones(BenchSettings(model="vit_micro", plans=["msa"], sizes=[InputSize(s, s)],
                                                  warmup=0, repeats=1))[0]["peak_mem_mb"] for s in (64, 512))
    assert 0 < small < large  # 16 vs 1,024 tokens: MSA's attention matrix alone grows 4,096x


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_a_convolution_step_counts_three_forward_passes_of_multiply_adds_whatever_its_groups(groups):
    """Forward, input gradient and weight gradient each multiply every (output position, weight
    element) pair once: 2 * B * C_out * (C_in / groups) * k * k * H * W FLOPs apiece."""
    B, C, H, W, k = 2, 16, 10, 12, 7
    conv = nn.Conv2d(C, C, k, padding=k // 2, groups=groups, bias=False)
    x = torch.randn(B, C, H, W, requires_grad=True)
    one_pass = 2 * B * C * (C // groups) * k * k * H * W
    assert count_flops(lambda: conv(x)) == one_pass
    assert count_flops(lambda: conv(x).sum().backward()) == 3 * one_pass
    frozen = torch.randn(B, C, H, W)  # no input gradient: the weight gradient only
    assert count_flops(lambda: conv(frozen).sum().backward()) == 2 * one_pass


def test_flop_count_matches_hand_count_for_a_tiny_vit():
    T, D, depth, mlp = 8 * 8, 32, 2, 4
    counts = {}
    for plan in ("msa", "none", "hydra", "aft", "polynl"):
        m = ViT(None, embed_dim=D, depth=depth, num_heads=2, patch_size=4, class_token=False, plan=plan).eval()
        x = torch.randn(1, 3, 32, 32)
        counts[plan] = count_flops(lambda: m(x))
    patch = 2 * T * (3 * 4 * 4) * D
    per_block = 2 * T * D * 3 * D + 2 * T * D * D + 2 * 2 * T * D * mlp * D  # qkv, proj, mlp
    assert counts["none"] == patch + depth * per_block
    assert counts["msa"] - counts["none"] == depth * 4 * T * T * D  # QK^T and AV
    # Hydra's and the baselines' work is elementwise (added by formula in reports)
    assert counts["hydra"] == counts["aft"] == counts["polynl"] == counts["none"]


def test_attention_share_of_vit_b_reproduces_the_paper():
    shares = {s["height"]: s for s in attention_flop_shares("vit_base", [parse_size("224"), parse_size("1080p")])}
    assert abs(shares[224]["attn_flop_share"] - 0.041) < 0.002  # paper: 4.1% at 224x224 (T=196 here, no cls)
    assert shares[1080]["attn_flop_share"] > 0.60  # paper: over 60% at 1080p
    for s in shares.values():
        assert abs(s["attn_flop_share"] - s["attn_flop_share_hand"]) < 0.01


def test_spec_parsing_errors():
    assert parse_size("1080p") == InputSize(1080, 1920)
    assert parse_size("16x224x224") == InputSize(224, 224, 16)
    with pytest.raises(ValueError, match="bad size '12a'"):
        parse_size("12a")
    with pytest.raises(ValueError, match="unknown plan 'flash'"):
        plan_from_name("flash", 12)
    assert plan_from_name("vitdet_hydra", 12).global_blocks == [2, 5, 8, 11]
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not present"):
            parse_devices("cuda")
        assert parse_devices("cpu,cuda") == [torch.device("cpu")]


def test_cli_rejects_bad_plan_and_size():
    for args, msg in ((["--plans", "msa,flash"], "unknown plan 'flash'"), (["--sizes", "abc"], "bad size 'abc'")):
        proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark.py"), *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and msg in proc.stderr


def test_decode_level_compares_whole_file_and_seeking_decoding(tmp_path):
    pytest.importorskip("av")
    from hydra_dense.bench.decode import write_test_video

    video = write_test_video(tmp_path / "v.mp4", seconds=4, fps=25, width=192, height=112, gop=20)
    out = tmp_path / "decode.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark.py"), "--level", "decode", "--video",
                           str(video), "--repeats", "1", "--no-memory", "--csv", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["case"], r["method"]): r for r in csv.DictReader(out.open())}
    assert set(rows) == {(c, m) for c in ("train", "eval") for m in ("whole file", "seek", "seek + resize on decode")}
    for case, views in (("train", 1), ("eval", 15)):
        whole, seek = rows[case, "whole file"], rows[case, "seek + resize on decode"]
        assert float(whole["frames_decoded"]) == float(whole["frames_kept"]) == 100 and int(seek["views"]) == views
        assert float(seek["frames_kept"]) <= 16 * (1 if case == "train" else 5)
        assert float(seek["frames_decoded"]) < 100 and float(seek["ms_per_sample"]) > 0
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark.py"), "--level", "decode", "--video",
                           str(tmp_path / "missing.mp4")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing.mp4 does not exist" in proc.stderr


def test_plan_names_live_on_the_plan():
    from hydra_dense.attention import LOCAL_NAMES

    plan = plan_from_name("hybrid4+dwc5", 12)
    assert plan.resolve(12) == ["msa"] * 8 + ["hydra"] * 4 and plan.local == "dwc5"
    assert plan_from_name("hydra_at0.11", 12).resolve(12)[::11] == ["hydra", "hydra"]
    names = plan_names(12)
    assert {"msa", "hybrid2", "vitdet_hydra"} <= set(names) and f"hydra+{LOCAL_NAMES[0]}" in names
    with pytest.raises(ValueError, match="has no Hydra / linear block"):
        plan_from_name("msa+dwc3", 12)


def test_onnxruntime_backend_times_both_runtimes_and_checks_parity(tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="the export extra: pip install -e .[export]")
    pytest.importorskip("onnxscript", reason="the export extra: pip install -e .[export]")
    out = tmp_path / "ort.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark.py"),
                           "--backend", "onnxruntime", "--model", "vit_micro", "--sizes", "64", "--plans", "msa,hydra",
                           "--warmup", "0", "--repeats", "1", "--csv", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open()))
    assert [r["plan"] for r in rows] == ["msa", "hydra"]
    assert all(float(r["torch_ms"]) > 0 and float(r["ort_ms"]) > 0 and float(r["max_abs_error"]) <= 1e-4 for r in rows)
    msa = rows[0]
    assert float(msa["torch_speedup_vs_msa"]) == 1.0 and float(msa["ort_ratio_pct_of_torch"]) == 100.0
    from hydra_dense.bench import command as tool

    assert tool.main(["--backend", "onnxruntime", "--mode", "train"]) == 2
    assert "--backend onnxruntime times backbone inference in fp32" in capsys.readouterr().err
