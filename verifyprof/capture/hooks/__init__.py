"""The in-process half of capture: NVTX hooks that put a host program's calls inside verifyprof
ranges without editing it. ``api`` installs and checks them; presets, targets, wrappers and
extractors are its parts; ``plugin`` and ``inject/`` carry them into SGLang's spawned processes.

Importing this package imports nothing else: the SGLang plugin must stay free when disabled."""
