"""OpenMMLab integration: hydra_dense's ViTs in mmseg's and mmdet's registries.

Install the stack first with ``tools/install_mm.sh``. In an mm config::

    custom_imports = dict(imports=["hydra_dense.mm"], allow_failed_imports=False)
    model = dict(backbone=dict(type="HydraViT", size="base", patch_size=16, plan={"default": "hydra"},
                               out_indices=[2, 5, 8, 11]), ...)
"""
from .availability import require_mm

require_mm()

from .backbone import HydraViT, ViTDetSimpleFPN, register  # noqa: E402
from .compat import patch_mmengine_checkpoint_loading, patch_mmengine_package_lookup  # noqa: E402

patch_mmengine_package_lookup()
patch_mmengine_checkpoint_loading()
register()

__all__ = ["HydraViT", "ViTDetSimpleFPN", "register", "require_mm"]
