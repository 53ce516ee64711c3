"""Run :mod:`moe_spec` (the module beside this script), so that its phases can be hooked by
``verifyprof capture --hook moe_spec:SpecLoop.check=verify ...`` (a script's own functions run as
``__main__`` and cannot be)."""

import sys

import moe_spec

if __name__ == "__main__":
    sys.exit(moe_spec.main())
