"""User-facing errors: one line naming the file and the problem, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

EXIT_BAD_INPUT = 2


class VerifyprofError(Exception):
    """An error the user can act on. ``str()`` is the one line the CLI prints."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, problem: str, path: str | Path | None = None):
        self.problem = problem
        self.path = None if path is None else Path(path)
        super().__init__(f"{self.path}: {problem}" if self.path is not None else problem)


class TraceError(VerifyprofError):
    """A trace file that cannot be read as one: not a trace, corrupt, empty, wrong schema."""


class NoStepsError(VerifyprofError):
    """No range matched the step regex; the message lists the most frequent range names."""


class ToolMissingError(VerifyprofError):
    """An external tool (nsys) is needed and absent; the message gives the command to run
    elsewhere."""


EXIT_CLOSED_PIPE = (
    141  # 128 + SIGPIPE: what other Unix tools end with when the reader goes (``| head``)
)


class OutputClosed(VerifyprofError):
    """Standard output's reader went away (``| head``): stop quietly, as other Unix tools do."""

    exit_code = EXIT_CLOSED_PIPE
