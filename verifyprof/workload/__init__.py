"""The project's own speculative-decoding workload (needs the ``torch`` extra).

A small decoder LM with a static KV cache (``model``, ``moe``), chain speculation as device-side
phases over static buffers (``spec``), simulated acceptance (``accept``), CUDA graphs of the
phases (``graphs``), tensor parallelism (``tp``), and the runner that emits verifyprof's ranges
and times every phase (``runner``). Run it with ``python -m verifyprof.workload``; capture it on a
GPU with ``traces/capture_workload.sh`` (``traces/README.md``).
"""
