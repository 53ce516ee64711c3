"""The command line: parse, call one pipeline function, print through report. No analysis
lives here; each command's module registers it on :data:`app`."""

from __future__ import annotations

import sys

from verifyprof.cli import analysis, before_after, capture_cmds  # noqa: F401 - they register
from verifyprof.cli.app import KERNELS_SCHEMA, WHATIF_SCHEMA, app

__all__ = ["KERNELS_SCHEMA", "WHATIF_SCHEMA", "app", "main"]


def main() -> None:
    """The console script: errors are one line (see :class:`verifyprof.cli.args._Group`)."""
    try:
        app()
    except KeyboardInterrupt:
        print("verifyprof: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
