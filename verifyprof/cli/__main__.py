"""``python -m verifyprof.cli``."""

from verifyprof.cli import main

main()
