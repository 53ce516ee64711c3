"""The fixes, one module per family: ``base`` (Scenario, Candidate, state edits), ``setup`` (the
cycle a scenario starts from), ``verify``, ``comm``, ``draft`` and ``cycle`` (whole-cycle fixes)."""
