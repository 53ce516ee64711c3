"""The project's own speculative-decoding workload (needs the ``torch`` extra)."""
