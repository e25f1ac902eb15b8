"""hydra_dense.bench.models: the benchmark's models by name and their token counts."""
from hydra_dense.bench.input_sizes import InputSize
from hydra_dense.bench.models import build_backbone, token_count


def test_token_counts_are_the_patch_grid_by_hand_for_images_and_clips():
    image = build_backbone("vit_micro", "msa", 16)
    assert token_count(image, InputSize(64, 96)) == (64 // 16) * (96 // 16)
    clip = build_backbone("video_vit_micro", "hydra", 16, 2)
    assert token_count(clip, InputSize(32, 48, 6)) == (6 // 2) * (32 // 16) * (48 // 16)
