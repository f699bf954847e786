#!/usr/bin/env bash
# One short GPU lease, prepared: issue 39's CUDA measurements as one command per call.
#
#   bash bench/cuda_session.sh OUTDIR PHASE [DATA_DIR]
#
# PHASE  bf16-1.4b   Pythia-1.4b shape, bfloat16, 1 and 5 seeds, batch 32, one warm-up and one
#                    measured round per case, then the 4-checkpoint sweep   (about 7 minutes)
#        bf16-6.9b   Pythia-6.9b shape, the same rows, no sweep              (about 7 minutes)
#        fp32-160m   Pythia-160m shape, float32, 1 and 5 seeds, no sweep     (about 3 minutes)
#        smoke       Pythia-14m, 64 prompts, 1 seed, no sweep: the script's own check (CPU too)
#
# Each phase writes OUTDIR/<phase>.json (rewritten after every measurement, so a time limit
# loses only the row in hand) and OUTDIR/<phase>.log. Render a section where the repository
# lives: python bench/bench_sweep.py --render-from OUTDIR/<phase>.json --out BENCHMARKS.md
#
# The machine must already hold torch (CUDA), transformers, numpy, pandas, pyarrow, scipy, rich
# and pyyaml; biasscope itself runs from this checkout's src/. A missing package (plotly, on the
# GPU image this project was measured on) travels as wheels in ./.whl, installed first when the
# folder exists. DATA_DIR (default ./.gpu/data) holds winobias/ with the pinned WinoBias files.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash bench/cuda_session.sh OUTDIR PHASE [DATA_DIR]}
phase=${2:?name a PHASE: bf16-1.4b, bf16-6.9b, fp32-160m or smoke}
data=${3:-.gpu/data}
python=${PYTHON:-python3}
mkdir -p "$out"
[ -d "$data/winobias" ] || { echo "cuda_session: $data/winobias is missing; pass the data folder as the third argument"; exit 2; }
if [ -d .whl ]; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
device=cuda
case "$phase" in
  bf16-1.4b) args=(--dtype bfloat16 --shapes pythia-1.4b --prompts 3168 --checkpoints 4
                   --sweep-shape pythia-1.4b) ;;
  bf16-6.9b) args=(--dtype bfloat16 --shapes pythia-6.9b --prompts 3168 --checkpoints 0) ;;
  fp32-160m) args=(--dtype float32 --shapes pythia-160m --prompts 3168 --checkpoints 0) ;;
  smoke) device=${DEVICE:-cpu}
         args=(--dtype float32 --shapes pythia-14m --prompts 64 --seeds 1 --checkpoints 0) ;;
  *) echo "cuda_session: unknown PHASE '$phase'; use bf16-1.4b, bf16-6.9b, fp32-160m or smoke"
     exit 2 ;;
esac
{
  date -u +"started %F %T UTC"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  "$python" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
} 2>&1 | tee "$out/$phase.log"
# The repeats and batch sizes are the issue's rows; `--seeds 1,5` unless the phase names others.
"$python" bench/bench_sweep.py --device "$device" --seeds 1,5 --batch-sizes 32 --repeats 1 \
  --data-dir "$data" "${args[@]}" --save "$out/$phase.json" 2>&1 | tee -a "$out/$phase.log"
status=${PIPESTATUS[0]}
date -u +"finished %F %T UTC, exit $status" | tee -a "$out/$phase.log"
exit "$status"
