#!/usr/bin/env bash
# hydra_dense one-stop entry: sets up its own virtual environment (idempotent), then runs.
#   ./run.sh demo   the main job: MSA vs Hydra vs hybrid on the embedded default data
#   ./run.sh test   the whole test suite
#   ./run.sh setup  only the environment
# Environment: HYDRA_DENSE_VENV (default .venv), PYTHON (default python3), HYDRA_DENSE_TEST_WORKERS
# (parallel test processes, default 2; 0 runs the suite in one process).
set -euo pipefail
cd "$(dirname "$0")"
VENV="${HYDRA_DENSE_VENV:-.venv}"
PY="${PYTHON:-python3}"

setup() {
  local stamp="$VENV/.hydra_dense_setup"
  local want
  want="$(cat setup.cfg pyproject.toml | sha1sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  echo "[setup] creating/updating $VENV (first run installs torch from local files: a few minutes)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch first, pinned to the build this machine has on disk, so nothing pulls another torch
  if ! "$VENV/bin/python" -c "import torch, torchvision" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q torch==2.14.1 torchvision==0.29.1
  fi
  "$VENV/bin/python" -m pip install -q -e ".[dev,weights,export]"
  echo "$want" > "$stamp"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  setup) setup ;;
  demo) setup; exec "$VENV/bin/python" tools/compare.py "$@" ;;
  test) setup; exec "$VENV/bin/python" -m pytest -q -n "${HYDRA_DENSE_TEST_WORKERS:-2}" --dist worksteal "$@" ;;
  *) echo "usage: ./run.sh {demo|test|setup} [args...]" >&2; exit 2 ;;
esac
