#!/usr/bin/env bash
# `verifyprof capture` for real on the H200 (issue 4), plus the checks that need nsys and a GPU.
#
#   traces/capture_verifyprof.sh OUTDIR      # from the repo root on the GPU machine; ~4 minutes
#
# OUTDIR/capture-workload-hooks/  the project's workload with its own ranges OFF and verifyprof's
#                                 `workload` hook preset putting them back from outside
# OUTDIR/capture-hf-assisted/     transformers assisted generation (random-weight Llama) with the
#                                 `hf-assisted` preset
# Each holds what `verifyprof capture --gzip` leaves (capture.sqlite.gz, manifest.json, logs, hook
# reports) plus breakdown.json and breakdown.txt from `verifyprof breakdown` of that trace.
# OUTDIR/bench_hook_overhead.{json,log}: hooks on vs off, eager and CUDA graph, one process.
# OUTDIR/pytest-gpu.log: the tests that skip without nsys and a GPU.
set -uo pipefail
OUT=${1:?usage: traces/capture_verifyprof.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
command -v nsys >/dev/null 2>&1 || source .device/nsys-env.sh >"$OUT/nsys-env.log" 2>&1
failed=()

step() {  # step NAME COMMAND...: run, log, remember failures
    local name=$1; shift
    echo "[$(date +%T)] $name"
    "$@" >"$OUT/$name.log" 2>&1 || { echo "  FAILED ($?), see $name.log"; failed+=("$name"); }
}

breakdown() {  # breakdown DIR: the verify steps the hooks produced, as JSON and as the table (run in DIR: no temp path in them)
    (cd "$1" && "$PY" -m verifyprof.cli breakdown capture.sqlite.gz --json >breakdown.json \
        && COLUMNS=140 "$PY" -m verifyprof.cli breakdown capture.sqlite.gz >breakdown.txt)
}

step capture-workload-hooks "$PY" -m verifyprof.cli capture --gzip --hooks workload --out "$OUT/capture-workload-hooks" -- \
    "$PY" -m verifyprof.workload --no-ranges --mode eager,graph --steps 30 --decode-steps 20 --num-draft 3 \
    --accept-len 2.0 --widths 4 --sweep-steps 0 --out "$OUT/capture-workload-hooks/workload.json"
step breakdown-workload breakdown "$OUT/capture-workload-hooks"

step capture-hf-assisted "$PY" -m verifyprof.cli capture --gzip --hooks hf-assisted --out "$OUT/capture-hf-assisted" -- \
    "$PY" scripts/hf_assisted.py --new-tokens 48 --runs 2 --draft noisy
step breakdown-hf breakdown "$OUT/capture-hf-assisted"

step bench_hook_overhead "$PY" bench/bench_hook_overhead.py --out "$OUT/bench_hook_overhead.json"
step pytest-gpu "$PY" -m pytest -q -p no:cacheprovider tests/test_capture_nsys.py tests/test_nsys_rep.py

echo "done; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
