"""Contracts every stage shares: errors, range names and the NVTX emitter, phase names, the
breakdown schema, the capture manifest, data-file lookup and atomic output files.

Nothing here imports a stage."""
