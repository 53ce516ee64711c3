#!/bin/bash
# Two torchrun ranks (gloo) on the H200's device 0, each profiled by torch.profiler into its own
# Kineto file (run-TP-<rank>.trace.json.gz, distributedInfo from the process group). Run on the
# H200 machine from the repository root; torch only.
set -e
export TRACE_DIR=${1:-traces/torchrun-2ranks-one-gpu}
torchrun --nproc-per-node 2 traces/torchrun-2ranks-one-gpu/program.py
