"""What every stage shares that is not a data contract: the operating system's side (reading
inputs safely, atomic outputs, the data-file lookup, a worker's lifetime), terminal escaping and
the NVTX emitter that runs inside the profiled program."""
