"""The decision: candidates ranked and stacked into a plan, plain decoding and the draft-count
curve (``speculate``), the verdict, the what-if entry (``whatif``), before/after comparison."""
