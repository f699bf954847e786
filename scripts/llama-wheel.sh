#!/usr/bin/env bash
# Install llama-cpp-python[server] (the OpenAI-compatible server the integration tests start)
# into a virtual environment, from a locally built wheel cached across runs.
#
#   scripts/llama-wheel.sh .venv/bin/python
#
# PyPI has only an sdist for llama-cpp-python, and compiling it takes about 5 min on 2 quiet
# cores (17-21 on busy ones), so
# the wheel is built once into ${BIASSCOPE_WHEEL_CACHE:-~/.cache/biasscope/wheels} and reused.
# GGML_NATIVE=OFF keeps the cached wheel portable across CPUs. Idempotent: a second run with the
# package already installed returns in about a second.
set -euo pipefail

VERSION=0.3.36
PY=${1:?usage: $0 PYTHON  (the python of the virtual environment to install into)}
CACHE=${BIASSCOPE_WHEEL_CACHE:-$HOME/.cache/biasscope/wheels}

installed() {
    "$PY" - "$VERSION" <<'PY' >/dev/null 2>&1
import importlib.metadata, sys
assert importlib.metadata.version("llama-cpp-python") == sys.argv[1]
import llama_cpp.server.app  # noqa: F401  (the [server] extra's packages are importable)
PY
}

if installed; then
    echo "llama-cpp-python $VERSION already installed for $PY"
    exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
if command -v flock >/dev/null; then flock 9; fi  # one build at a time per cache

shopt -s nullglob
wheels=("$CACHE"/llama_cpp_python-"$VERSION"-*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
    echo "building llama-cpp-python $VERSION wheel into $CACHE"
    echo "(a cold build compiles llama.cpp: about 5 min on 2 quiet cores, up to 20 on busy ones; later runs reuse the wheel)"
    tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" \
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        "$PY" -m pip wheel --no-deps "llama-cpp-python==$VERSION" -w "$tmp"
    mv "$tmp"/llama_cpp_python-"$VERSION"-*.whl "$CACHE"/
fi

# --only-binary: never fall back to compiling the sdist with other flags behind our back.
"$(dirname "$0")/pinned-pip.sh" "$PY" -q --find-links "$CACHE" --only-binary llama-cpp-python \
    "llama-cpp-python[server]==$VERSION"
echo "llama-cpp-python $VERSION installed for $PY"
