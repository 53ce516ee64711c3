#!/bin/bash
# Issue 43 item 6 on a device host, in one call: the CLI against the sqlite3 fetchall on every
# CPU, then on 2 (taskset), each beside the code before in the same rounds; the read by Arrow
# batch size and switch interval; the timeline of a table and a --json run. Logs under $OUT.
#
# Before the call, here (the code before as a checkout of its own, ignored by git):
#   mkdir -p .head && git archive BASE verifyprof | tar -x -C .head
# and carry it with the wheels the device lacks (.whl: adbc, orjson, msgspec, nvtx) and
# .device: run(command="bash bench/cli_speed_device.sh", carry=[".whl", ".device", ".head"]).
# ROUNDS (default 7) sets the 16-CPU rounds; about 200 s of work in all.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=$PWD/bench/out/pycache
V=$(python3 -c 'import sys,pandas,pyarrow,typer;print("Python",sys.version.split()[0]+", pandas",pandas.__version__+", pyarrow",pyarrow.__version__+", typer",typer.__version__)')
H="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) host, $(nproc) CPUs, $V"
run() { local out=$1; shift; { echo "# $*; $H; $(date -u '+%F %H:%M') UTC"; "$@"; } > "$OUT/$out" 2>&1; echo "$out: exit $? $(date -u +%T)"; }
run cli16.log python3 bench/bench_cli_process.py --kernels 1000000 --rounds "${ROUNDS:-7}" --against .head --json "$OUT/cli16.json"
run read16.log python3 bench/bench_read_batches.py --rounds 3 --batches 16384 65536 --switch 0.005 0.0005
{ for a in "" --json; do echo "## breakdown $a"; python3 bench/cli_timeline.py bench/out/ranks/nsys_1000000_8r.sqlite $a >/dev/null; done; } > "$OUT/tl16.log" 2>&1
run cli2.log taskset -c 0,1 python3 bench/bench_cli_process.py --kernels 1000000 --rounds 3 --against .head --json "$OUT/cli2.json"
tail -n 8 "$OUT/cli16.log" "$OUT/read16.log" "$OUT/cli2.log"
