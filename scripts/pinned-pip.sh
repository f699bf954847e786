#!/usr/bin/env bash
# pip install under the versions CI was last green with (.ci/constraints.txt), so that CI and
# `make test` are reproducible while the package itself keeps its version ranges for users.
#
#   scripts/pinned-pip.sh .venv/bin/python -q -e '.[hf,dev]'
#
# BIASSCOPE_CONSTRAINTS names another constraints file; empty installs what pip resolves today
# (`make test-latest`). The file records the Python it was frozen with; under another Python its
# pins may not exist, so it is then left out with a one-line note.
set -euo pipefail

PY=${1:?usage: $0 PYTHON PIP_INSTALL_ARGS...}
shift
C=${BIASSCOPE_CONSTRAINTS-"$(cd "$(dirname "$0")/.." && pwd)/.ci/constraints.txt"}
pin=()
if [ -n "$C" ]; then
    want=$(sed -n 's/^# python \([0-9][0-9.]*\).*/\1/p' "$C" | head -n 1)
    have=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ "$want" = "$have" ]; then
        pin=(-c "$C")
    else
        echo "note: $C was frozen on Python $want, this is Python $have: installing what pip resolves today" >&2
    fi
fi
exec "$PY" -m pip install ${pin[@]+"${pin[@]}"} "$@"
