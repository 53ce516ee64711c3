"""PyTorch-profiler (Kineto) JSON: one file or a set of per-rank files."""
