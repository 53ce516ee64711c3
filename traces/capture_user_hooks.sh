#!/usr/bin/env bash
# `verifyprof capture` with user `--hook module:qualname=phase` targets only (issue 10): no hook
# preset, no built-in ranges, no PYTHONPATH set for the programs' sake (only for verifyprof itself).
#
#   traces/capture_user_hooks.sh OUTDIR      # from anywhere, on the GPU machine; ~3 minutes
#
# OUTDIR/capture-workload-compile-hooks/  the workload with its own ranges off and its verify under
#     torch.compile(mode="reduce-overhead", fullgraph=True): eager and compiled speculative steps in
#     one process. The hook is on SpecState.verify, the very function the workload hands to
#     torch.compile, so Dynamo meets verifyprof's wrapper (issue 10, item 2); the draft phase is
#     hooked on Workload.draft. workload.json is the workload's own CUDA-event summary; its
#     config.compile says whether fullgraph held (fullgraph_error otherwise) and whether
#     cudagraph trees replayed the verify.
# OUTDIR/capture-hf-assisted-user-hooks/  transformers assisted generation with the candidate
#     generator hooked as draft and LlamaForCausalLM.forward as verify (the draft model is a
#     Llama too: its forwards land in the same phase, issue 10, item 3).
# Each folder is what `verifyprof capture --gzip` leaves; OUTDIR/NAME.log is its console output.
set -uo pipefail
OUT=${1:?usage: traces/capture_user_hooks.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
# verifyprof is not pip-installed on the GPU machine: PYTHONPATH stands in for that install (the
# hooks' sitecustomize imports it); the programs' own modules get no help from it.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
command -v nsys >/dev/null 2>&1 || source .device/nsys-env.sh >"$OUT/nsys-env.log" 2>&1
"$PY" -c "import nvtx" 2>/dev/null || echo "warning: no nvtx package for $PY: ranges go to NVTX's default domain without payload (carry the nvtx wheel)" >&2
read -r -a EXTRA <<<"${WORKLOAD_ARGS:-}"
failed=()

step() {  # step NAME COMMAND...: run, log, remember failures
    local name=$1; shift
    echo "[$(date +%T)] $name"
    "$@" >"$OUT/$name.log" 2>&1 || { echo "  FAILED ($?), see $name.log"; failed+=("$name"); }
}

# capture-workload-compile-userhooks (issue 10, with the capture fixes): the same, plus --baseline-run
# for the profiler's dilation; verify hooked on the method the workload hands to torch.compile.
step capture-workload-compile-userhooks "$PY" -m verifyprof.cli capture --gzip --baseline-run --out "$OUT/capture-workload-compile-userhooks" \
    --hook 'verifyprof.workload.spec:SpecState.verify=verify' --hook verifyprof.workload.runner:Workload.draft=draft -- \
    "$PY" -m verifyprof.workload --no-ranges --mode eager,compile --steps 20 --decode-steps 0 --widths "" \
    --num-draft 3 --accept-len 2.0 "${EXTRA[@]}" --out "$OUT/capture-workload-compile-userhooks/workload.json"

step capture-workload-compile-hooks "$PY" -m verifyprof.cli capture --gzip --out "$OUT/capture-workload-compile-hooks" \
    --hook verifyprof.workload.spec:SpecState.verify=verify --hook verifyprof.workload.runner:Workload.draft=draft -- \
    "$PY" -m verifyprof.workload --no-ranges --mode eager,compile --steps 20 --decode-steps 0 --widths "" \
    --num-draft 3 --accept-len 2.0 "${EXTRA[@]}" --out "$OUT/capture-workload-compile-hooks/workload.json"

step capture-hf-assisted-user-hooks "$PY" -m verifyprof.cli capture --gzip --out "$OUT/capture-hf-assisted-user-hooks" \
    --hook transformers.generation.candidate_generator:AssistedCandidateGenerator.get_candidates=draft \
    --hook transformers.models.llama.modeling_llama:LlamaForCausalLM.forward=verify -- \
    "$PY" scripts/hf_assisted.py --new-tokens 24 --runs 1 --draft noisy

echo "done; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
