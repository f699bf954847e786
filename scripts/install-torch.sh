#!/usr/bin/env bash
# Install torch into a virtual environment before anything else can pull in a build of its own
# choosing, and say which build it is.
#
#   scripts/install-torch.sh .venv/bin/python 'torch==2.13.0'
#
# With a working NVIDIA GPU (nvidia-smi lists one): the default index's build (CUDA on Linux).
# Without one: PyTorch's CPU index, so that pip does not fetch the CUDA build and its nvidia-*
# packages (gigabytes). Where that index cannot be reached (an air-gapped mirror, a proxy), the
# default index, with a one-line note: what it serves is then the build this machine's pip offers.
# TORCH_INDEX overrides the CPU index (e.g. a local mirror); TORCH_INDEX=default skips it.
set -euo pipefail

PY=${1:?usage: $0 PYTHON TORCH_REQUIREMENT}
REQ=${2:?usage: $0 PYTHON TORCH_REQUIREMENT (e.g. torch==2.13.0)}
CPU_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

which_build() {
    "$PY" - <<'PY'
import warnings

warnings.simplefilter("ignore")  # "Failed to initialize NumPy": numpy comes with the package
import torch
cuda = torch.version.cuda
print(f"torch {torch.__version__} installed: " + (f"CUDA {cuda} build" if cuda else "CPU build"))
PY
}

if nvidia-smi -L >/dev/null 2>&1; then
    echo "an NVIDIA GPU is present: installing $REQ from the default index"
    "$PY" -m pip install -q "$REQ"
elif [ "$CPU_INDEX" = default ]; then
    "$PY" -m pip install -q "$REQ"
elif "$PY" - "$CPU_INDEX" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=15).close()
except Exception:
    sys.exit(1)
PY
then
    echo "no NVIDIA GPU: installing $REQ from PyTorch's CPU index ($CPU_INDEX)"
    "$PY" -m pip install -q --index-url "$CPU_INDEX" "$REQ"
else
    echo "note: PyTorch's CPU index ($CPU_INDEX) is unreachable: installing $REQ from the default index"
    "$PY" -m pip install -q "$REQ"
fi
which_build
