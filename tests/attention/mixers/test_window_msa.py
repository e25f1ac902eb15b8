"""Window attention: MSA inside each window, and timm's SAM attention with relative positions."""
import torch

from hydra_dense.attention import MSAttention, TokenLayout, WindowMSAttention


def test_window_attention_equals_msa_inside_each_window():
    torch.manual_seed(0)
    win = WindowMSAttention(16, num_heads=2, window_size=2).double()
    msa = MSAttention(16, num_heads=2).double()
    msa.load_state_dict(win.state_dict())
    x = torch.randn(1, 1 + 4 * 6, 16, dtype=torch.float64)  # 1 cls token + a 4x6 grid
    out = win(x, TokenLayout((4, 6), 1))
    grid = x[:, 1:].reshape(1, 4, 6, 16)
    for i in range(0, 4, 2):
        for j in range(0, 6, 2):
            ref = msa(grid[:, i:i + 2, j:j + 2].reshape(1, 4, 16)).reshape(1, 2, 2, 16)
            torch.testing.assert_close(out[:, 1:].reshape(1, 4, 6, 16)[:, i:i + 2, j:j + 2], ref)
    # a window larger than the (padded) grid is global attention
    big = WindowMSAttention(16, num_heads=2, window_size=8).double()
    big.load_state_dict(win.state_dict())
    torch.testing.assert_close(big(x[:, 1:], TokenLayout((4, 6), 0)), msa(x[:, 1:]))


def test_window_attention_rel_pos_equals_timm_sam_attention_in_each_window():
    from timm.models.vision_transformer_sam import Attention as SamAttention

    torch.manual_seed(0)
    win = WindowMSAttention(16, num_heads=2, window_size=3, rel_pos=True).double()
    with torch.no_grad():
        win.rel_pos_h.normal_()
        win.rel_pos_w.normal_()
    sam = SamAttention(16, num_heads=2, use_rel_pos=True, input_size=(3, 3)).double()
    sam.load_state_dict(win.state_dict())
    x = torch.randn(2, 6 * 6, 16, dtype=torch.float64)
    out = win(x, TokenLayout((6, 6), 0)).reshape(2, 6, 6, 16)
    grid = x.reshape(2, 6, 6, 16)
    for i in range(0, 6, 3):
        for j in range(0, 6, 3):
            torch.testing.assert_close(out[:, i:i + 3, j:j + 3], sam(grid[:, i:i + 3, j:j + 3]))
