"""The speculative cycle: its parts, their timing (the host/GPU race), throughput, and the
verify's cost against width."""
