"""A capture manifest's ``command`` record, as capture writes it and its readers read it: the
value a command word names, and the fingerprints of the files the command names
(``command.inputs``). One reading for capture (writing), ``capture --again`` (its directory
check) and the model (joining captures on evidence)."""

from __future__ import annotations

from typing import Any


def argument_value(word: str) -> str:
    """What a command word names: the value of ``--opt=VALUE``, "" for a bare option, else the
    word itself (``--opt VALUE``'s value is a word of its own)."""
    return word.partition("=")[2] if word.startswith("-") else word


def recorded_inputs(raw: Any) -> dict[int, str]:
    """``command.inputs`` of a manifest's raw JSON: the argument's index in ``command.target``
    -> its file's fingerprint (none for captures made before capture took them)."""
    command = raw.get("command") if isinstance(raw, dict) else None
    inputs = command.get("inputs") if isinstance(command, dict) else None
    entries = inputs if isinstance(inputs, list) else []
    return {
        int(x["arg"]): str(x["digest"])
        for x in entries
        if isinstance(x, dict) and isinstance(x.get("arg"), int) and x.get("digest")
    }
