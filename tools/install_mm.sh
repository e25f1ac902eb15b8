#!/usr/bin/env bash
# OpenMMLab stack for this torch: mmcv 2.1.0 with compiled ops, mmengine,
# mmsegmentation 1.2.2, mmdetection 3.3.0, into the project's virtual environment.
#   tools/install_mm.sh            (HYDRA_DENSE_VENV picks another venv; default .venv)
# No mmcv wheel exists for torch 2.14, and mmcv 2.1.0 only builds here with --no-build-isolation,
# setuptools<70 (its setup.py imports pkg_resources) and C++20 (torch 2.14's headers reject the
# -std=c++14/17 flags hard-coded in its setup.py). The wheel is built once per machine and torch
# version (about 20 min of CPU on 2 cores) and kept in pip's cache folder for every later install.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HYDRA_DENSE_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || ./run.sh setup
PY="$(cd "$VENV" && pwd)/bin/python"  # absolute: the build below runs in another folder
TORCH=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")
WHEELS="$("$PY" -m pip cache dir)/hydra_dense-wheels/torch-$TORCH"
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/mmcv-2.1.0-*.whl >/dev/null 2>&1; then
  echo "[mm] no mmcv 2.1.0 wheel for torch $TORCH in $WHEELS: building it from source"
  echo "[mm] (once per machine; about 20 min of CPU on 2 cores; progress as [compiled/total] below)"
  # setuptools<70 only for the build (mmcv's setup.py imports pkg_resources), restored after it:
  # torch 2.14 requires setuptools>=77 (hydra_dense.mm patches mmengine's pkg_resources lookups)
  "$PY" -m pip install -q "setuptools<70" wheel ninja
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  "$PY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation mmcv==2.1.0 -d "$src"
  tar xzf "$src"/mmcv-2.1.0.tar.gz -C "$src"
  sed -i 's/-std=c++14/-std=c++20/g; s/-std=c++17/-std=c++20/g' "$src/mmcv-2.1.0/setup.py"
  log="$src/build.log"
  # the whole log goes to a file; only progress lines are shown, and the log's end on failure
  if ! (cd "$src/mmcv-2.1.0" && MAX_JOBS="$(nproc)" MMCV_WITH_OPS=1 \
        "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WHEELS" . 2>&1 | tee "$log" |
        { grep --line-buffered -E '\[[0-9]+/[0-9]+\]|Created wheel' || true; } |
        sed -u 's/ -[^ ]*//g; s/^\(.\{120\}\).*/\1/'); then
    echo "[mm] the mmcv build failed; the end of its log:" >&2
    grep -v "WARNING: Location" "$log" | tail -40 >&2
    exit 1
  fi
  "$PY" -m pip install -q "setuptools>=77.0.3"
  ls "$WHEELS"/mmcv-2.1.0-*.whl >/dev/null 2>&1 || { echo "[mm] the mmcv build failed" >&2; exit 1; }
else
  echo "[mm] using the cached wheel $(ls "$WHEELS"/mmcv-2.1.0-*.whl)"
fi
"$PY" -m pip install -q "$WHEELS"/mmcv-2.1.0-*.whl
"$PY" -m pip install -q -e ".[mm]"
"$PY" -c "import mmcv, mmcv.ops, mmengine, mmseg, mmdet, mmseg.models, mmdet.models
print('[mm] ready: mmcv', mmcv.__version__, 'mmengine', mmengine.__version__, 'mmseg', mmseg.__version__, 'mmdet', mmdet.__version__)"
