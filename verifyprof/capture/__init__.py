"""Capture: NVTX hooks, server and program orchestration under Nsight Systems, workload driver."""
