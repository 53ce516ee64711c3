"""User-facing errors: one line naming the file and the problem, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

from verifyprof.contracts.plumbing.text import safe_text

EXIT_BAD_INPUT = 2


class VerifyprofError(Exception):
    """An error the user can act on. ``str()`` is the one line the CLI prints."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, problem: str, path: str | Path | None = None):
        self.problem = problem
        self.path = None if path is None else Path(path)
        # the path is data: its control characters (a newline included) stay escaped when the
        # CLI keeps the problem's own line breaks
        where = safe_text(str(self.path)) if self.path is not None else None
        super().__init__(f"{where}: {problem}" if where is not None else problem)


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


NAME_MAX = 255  # bytes in one file name (every Linux file system verifyprof reads from)


def path_problem(exc: OSError, path: str | Path | None = None) -> str:
    """What an ``OSError`` on ``path`` means, in words (the one place they are chosen): a folder
    on the way that cannot be searched, a file that cannot be read, a name too long, a loop of
    symbolic links. ``path`` defaults to the error's own file name."""
    import errno
    import os

    where = Path(os.fsdecode(path if path is not None else exc.filename or ""))
    if exc.errno in (errno.EACCES, errno.EPERM):
        folder = next(
            (p for p in reversed(where.parents) if p.is_dir() and not os.access(p, os.X_OK)),
            None,
        )
        if folder is not None:
            return f"permission denied: the folder {folder} cannot be searched (no x permission)"
        if os.access(where, os.F_OK) and os.path.isdir(where):
            return "permission denied: the folder cannot be listed or searched"
        return "permission denied: it cannot be read"
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(where.parts, key=lambda part: len(os.fsencode(part)), default="")
        size = len(os.fsencode(longest))
        if size > NAME_MAX:
            return f"file name too long: '{longest[:40]}…' is {size} bytes, more than {NAME_MAX}"
        return "file name too long: the path is longer than the system allows"
    if exc.errno == errno.ELOOP:
        return "symlink loop: too many levels of symbolic links"
    if exc.errno == errno.ENOENT:
        return "no such file or folder"
    if exc.errno == errno.ENOTDIR:
        return "not found: a part of the path is a file, not a folder"
    return exc.strerror or str(exc)


def path_error(exc: OSError, path: str | Path | None = None, what: str = "") -> VerifyprofError:
    """The one-line error for an ``OSError`` on ``path`` (:func:`path_problem`), ``what`` (e.g.
    ``"cannot read the taxonomy: "``) before the words."""
    name = path if path is not None else exc.filename
    return VerifyprofError(what + path_problem(exc, name), name)
