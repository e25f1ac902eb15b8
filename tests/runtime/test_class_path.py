"""runtime.class_path: a config's class_path imported and compared as a class."""
from hydra_dense.backbones import VideoViT, ViT
from hydra_dense.runtime.class_path import imported_class, names_subclass_of


def test_a_class_path_imports_as_its_class_and_anything_else_as_none():
    assert imported_class("hydra_dense.backbones.ViT") is ViT
    assert imported_class("hydra_dense.backbones.vit.ViT") is ViT  # the module's path and the re-export agree
    for bad in ("", "ViT", "hydra_dense.backbones.NoSuchClass", "no_such_package.Thing",
                "hydra_dense.backbones.VIT_SIZES", None):  # VIT_SIZES imports, but is no class
        assert imported_class(bad) is None, bad


def test_subclasses_answer_as_their_base_and_names_alone_do_not():
    assert names_subclass_of("hydra_dense.backbones.VideoViT", VideoViT)
    assert not names_subclass_of("hydra_dense.backbones.ViT", VideoViT)
    assert not names_subclass_of("somewhere.else.VideoViT", VideoViT)  # ends in the name, is not the class
