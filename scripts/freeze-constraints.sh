#!/usr/bin/env bash
# Rewrite .ci/constraints.txt from a virtual environment in which the whole suite passed:
#
#   scripts/freeze-constraints.sh .venv-latest/bin/python
#
# Every installed distribution at its version (pip freeze), less the project itself; torch
# without its local build tag (2.13.0, not 2.13.0+cpu) so that a CUDA machine can satisfy it.
set -euo pipefail
PY=${1:?usage: $0 PYTHON  (the python of a venv where make test passed)}
OUT="$(cd "$(dirname "$0")/.." && pwd)/.ci/constraints.txt"
{
    "$PY" -c 'import platform, sys; print("# python %d.%d" % sys.version_info[:2], "(" + platform.machine(), platform.system() + ")")'
    echo "# The versions CI was last green with; scripts/freeze-constraints.sh writes this file and"
    echo "# docs/install.md (Tested versions) says when. The package itself keeps its ranges."
    "$PY" -m pip freeze --exclude-editable --disable-pip-version-check \
        | grep -v '^biasscope[= @]' | sed -E 's/^(torch(vision|audio)?==[^+]+)\+.*/\1/' | LC_ALL=C sort -f
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT ($(grep -vc '^#' "$OUT") pins)"
