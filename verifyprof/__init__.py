"""verifyprof: what is inside the speculative-decoding verify step, and which fix pays most."""

__version__ = "0.1.0"
