"""The tiny finished run the checkpoint tests load (the same fixture as the refusal tests)."""
from tests.runtime.conftest import seg_run  # noqa: F401
