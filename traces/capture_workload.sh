#!/usr/bin/env bash
# Capture the project's speculative-decoding workload (verifyprof/workload) under Nsight Systems.
#
#   traces/capture_workload.sh OUTDIR            # on the H200, from anywhere; ~3-5 minutes
#   TP=2 traces/capture_workload.sh OUTDIR       # tensor-parallel traces instead (issue 5), one GPU per rank
#
# For each trace NAME it leaves OUTDIR/NAME/ with: trace.sqlite.gz (the nsys SQLite export),
# stats_nvtx_gpu_proj_sum.csv and stats_cuda_gpu_kern_sum.csv (NVIDIA's own `nsys stats`, the test
# oracle), summary.json (the workload's CUDA-event timings, accept length, tok/s), manifest.json
# (commands, GPU, driver, torch, CUDA, nsys versions, results), and the logs of every step.
# OUTDIR/reference/ holds summaries of eager+graph runs in one process without nsys, with and
# without NVTX ranges. Set KEEP_REP=1 to also copy the .nsys-rep files; PYTHON to pick the interpreter;
# WORKLOAD_ARGS to append arguments to every workload command (e.g. "--preset tiny --device cpu" for a dry run);
# ONLY to run a subset, e.g. ONLY=dense or ONLY=moe,reference (names containing one of the words);
# ONLY=pipelined,compile makes the issue-9 sets: 30 verifies queued back to back without a host sync
# (eager, CUDA graph) and eager / CUDA graph / torch.compile(reduce-overhead) verify in one process,
# plus OUTDIR/reference/eager-graph-compile.summary.json, the same compile run without nsys.
# Exit status: 0 when every required trace was captured and each gzipped SQLite is under 16 MiB.
set -uo pipefail

OUT=${1:?usage: traces/capture_workload.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2  # the repository root
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # multicast stays off
PY=${PYTHON:-python3}
TP=${TP:-1}

if ! command -v nsys >/dev/null 2>&1; then
    if [ -f .device/nsys-env.sh ]; then
        # shellcheck disable=SC1091
        source .device/nsys-env.sh >"$OUT/nsys-env.log" 2>&1
    fi
fi
command -v nsys >/dev/null 2>&1 || { echo "nsys not found: source .device/nsys-env.sh first" >&2; exit 2; }

"$PY" -c "import nvtx" 2>/dev/null || echo "warning: no nvtx package for $PY: ranges go to NVTX's default domain without payload (carry the nvtx wheel)" >&2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/verifyprof-capture.XXXXXX")
failed=()
started=$(date +%s)

# Sized so that each gzipped export stays well under 16 MiB (expected 2-5 MiB each).
COMMON=(--warmup 5 --num-draft 3 --accept-len 2.0 --widths 1,2,4,8,16 --batch 1 --context 512)
DENSE=(--steps 40 --decode-steps 30 --sweep-steps 8)
MOE=(--moe-experts 64 --moe-topk 4 --moe-intermediate 1024 --steps 30 --decode-steps 20 --sweep-steps 6)
PIPELINED=(--steps 0 --decode-steps 0 --widths "" --pipelined 30)  # verify only, no host sync between steps
COMPILE=(--steps 30 --decode-steps 0 --widths "")                   # speculative steps, verify compiled
read -r -a EXTRA <<<"${WORKLOAD_ARGS:-}"

selected() {  # ONLY="dense-eager,reference" limits the run to names containing one of the words
    [ -z "${ONLY:-}" ] && return 0
    local word; for word in ${ONLY//,/ }; do [[ $1 == *"$word"* ]] && return 0; done
    return 1
}

capture() {  # capture NAME required|optional WORKLOAD-ARGS...
    local name=$1 need=$2; shift 2
    selected "$name" || return 0
    local dir="$WORK/$name" target
    mkdir -p "$dir"
    if [ "$TP" -gt 1 ]; then
        target=("$PY" -m torch.distributed.run --nproc-per-node "$TP" -m verifyprof.workload "$@" "${EXTRA[@]}" --out "$dir/summary.json")
    else
        target=("$PY" -m verifyprof.workload "$@" "${EXTRA[@]}" --out "$dir/summary.json")
    fi
    local profiler=(nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --capture-range=cudaProfilerApi
                    --capture-range-end=stop --cuda-graph-trace=node -o "$dir/trace" -f true)
    local reports=nvtx_gpu_proj_sum,cuda_gpu_kern_sum
    [ "$TP" -gt 1 ] && reports=$reports,nccl_sum
    echo "[$(date +%T)] $name: capturing"
    if "${profiler[@]}" "${target[@]}" >"$dir/profile.log" 2>&1 \
        && nsys export --type sqlite --include-blobs=true -f true -o "$dir/trace.sqlite" "$dir/trace.nsys-rep" >"$dir/export.log" 2>&1 \
        && nsys stats -q -r "$reports" --format csv -o "$dir/stats" "$dir/trace.sqlite" >"$dir/stats.log" 2>&1; then
        gzip -9 "$dir/trace.sqlite"
        [ "${KEEP_REP:-0}" = 1 ] || mv "$dir/trace.nsys-rep" "$WORK/$name.nsys-rep"
        "$PY" -m verifyprof.workload.write_manifest "$dir" --target-from "${#profiler[@]}" -- "${profiler[@]}" "${target[@]}" \
            || failed+=("$name (size)")
        echo "[$(date +%T)] $name: $(du -h "$dir/trace.sqlite.gz" | cut -f1) gzipped; $(grep -E '^(spec|decode|pipe)' "$dir/profile.log" | tr '\n' ';')"
    else
        echo "[$(date +%T)] $name: FAILED, see $name/*.log" >&2
        rm -f "$dir/trace.nsys-rep" "$dir/trace.sqlite"
        [ "$need" = required ] && failed+=("$name")
    fi
    cp -r "$dir" "$OUT/"
}

if [ "$TP" -gt 1 ]; then
    capture "workload-tp$TP-dense-eager" required --mode eager "${COMMON[@]}" "${DENSE[@]}"
    capture "workload-tp$TP-dense-graph" required --mode graph "${COMMON[@]}" "${DENSE[@]}"
    capture "workload-tp$TP-moe-eager" optional --mode eager "${COMMON[@]}" "${MOE[@]}"
else
    capture workload-dense-eager required --mode eager "${COMMON[@]}" "${DENSE[@]}"
    capture workload-dense-graph required --mode graph "${COMMON[@]}" "${DENSE[@]}"
    capture workload-moe-eager required --mode eager "${COMMON[@]}" "${MOE[@]}"
    capture workload-moe-graph optional --mode graph "${COMMON[@]}" "${MOE[@]}"
    capture workload-dense-pipelined-eager required --mode eager "${COMMON[@]}" "${PIPELINED[@]}"
    capture workload-dense-pipelined-graph required --mode graph "${COMMON[@]}" "${PIPELINED[@]}"
    capture workload-dense-compile required --mode eager,graph,compile "${COMMON[@]}" "${COMPILE[@]}"
    if selected reference-compile; then  # the compile set without nsys: the profiler's dilation
        mkdir -p "$OUT/reference"
        echo "[$(date +%T)] reference-compile: running"
        "$PY" -m verifyprof.workload --mode eager,graph,compile "${COMMON[@]}" "${COMPILE[@]}" "${EXTRA[@]}" \
            --out "$OUT/reference/eager-graph-compile.summary.json" >"$OUT/reference/eager-graph-compile.log" 2>&1 \
            || failed+=("reference-compile")
    fi

    # Without nsys: eager and graph measured in one process, with and without the NVTX ranges.
    for variant in ranges noranges; do
        selected "reference-$variant" || continue
        mkdir -p "$OUT/reference"
        flags=(); [ $variant = noranges ] && flags=(--no-ranges)
        echo "[$(date +%T)] reference-$variant: running"
        "$PY" -m verifyprof.workload --mode eager,graph "${COMMON[@]}" "${DENSE[@]}" "${flags[@]}" "${EXTRA[@]}" \
            --out "$OUT/reference/eager-graph-$variant.summary.json" >"$OUT/reference/eager-graph-$variant.log" 2>&1 \
            || failed+=("reference-$variant")
    done
fi

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
total=$(du -cb "$OUT"/*/*.gz 2>/dev/null | tail -1 | cut -f1)
echo "done in $(( $(date +%s) - started )) s; gzipped traces: $(( ${total:-0} / 1048576 )) MiB in $OUT"
rm -rf "$WORK"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
