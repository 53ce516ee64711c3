"""``capture --again CAPTURE``: the arguments expanded before click parses them (the recorded
command is :mod:`verifyprof.contracts.capture_again`'s), so the capture runs, and records in its
manifest, the whole command as if typed."""

from __future__ import annotations

import sys

from verifyprof.contracts.capture_again import AGAIN, again_argv
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.paths import user_path


def expanded(group, args: list[str], from_argv: bool) -> list[str]:
    """``args`` with ``capture --again PATH`` replaced by the recorded command; unchanged for
    every other command. ``from_argv``: they are the process's own (``sys.argv`` then says the
    expanded command, which the capture's manifest records). ``group``: the CLI's click group
    (typer's own click: its parameters are read by their attributes)."""
    if args[:1] != ["capture"]:
        return args
    head = args[1:]
    cut = head.index("--") if "--" in head else len(head)
    found = [i for i, a in enumerate(head[:cut]) if a.split("=", 1)[0] == AGAIN]
    if not found:
        return args
    if len(found) > 1:
        raise VerifyprofError(f"{AGAIN} given {len(found)} times: give one capture to repeat")
    at, word = found[0], head[found[0]]
    if "=" in word:
        path, rest = word.split("=", 1)[1], head[:at] + head[at + 1 :]
    elif at + 1 < cut:
        path, rest = head[at + 1], head[:at] + head[at + 2 :]
    else:
        path, rest = "", head
    if not path:
        raise VerifyprofError(f"{AGAIN} needs a capture folder or its manifest.json")
    command = group.commands["capture"]
    valued = {
        name
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "is_flag", True)
        for name in (*p.opts, *p.secondary_opts)
    }
    from verifyprof.pipeline.capture_inputs import smallest_capture  # only for --again

    capture = smallest_capture(user_path(path, AGAIN))  # a --batches folder: its smallest load
    out = ["capture", *again_argv(capture, rest, valued.__contains__)]
    if from_argv:
        sys.argv[1:] = out
    return out
