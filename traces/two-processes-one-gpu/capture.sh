#!/bin/bash
# Two nsys reports captured at the same time, one per process, both processes on the H200's
# device 0 (as two nodes' reports are, each of its own device 0). Run on the H200 machine from the
# repository root after `source .device/nsys-env.sh`; torch only.
set -e
out=${1:-/tmp/nodes}
mkdir -p "$out"
for n in a b; do
  nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o "$out/node-$n" --force-overwrite true \
    python3 traces/two-processes-one-gpu/program.py > "$out/nsys-$n.log" 2>&1 &
  sleep 1
done
wait
for n in a b; do
  nsys export --type sqlite --include-blobs=true -o "$out/node-$n.sqlite" --force-overwrite true "$out/node-$n.nsys-rep"
  gzip -c "$out/node-$n.sqlite" > "traces/two-processes-one-gpu/node-$n.sqlite.gz"
done
