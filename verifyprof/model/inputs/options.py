"""What the what-if is asked: the options (plain numbers or a breakdown's), checked once, and
where the accept length comes from (option > capture manifest > the trace)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verifyprof.contracts.bounds import (
    CONTEXT,
    MAX_DRAFTS,
    check_accept_len,
    check_alpha,
    check_count,
    check_fields,
    check_nonnegative,
    check_number,
    check_positive,
)
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.inputs.acceptance import Survival, parse_survival
from verifyprof.model.inputs.leviathan import (
    expected_tokens,
)

if TYPE_CHECKING:  # annotations only: the options are checked before pandas is loaded
    from verifyprof.model.inputs.profile import VerifyProfile


@dataclass
class WhatifOptions:
    verify_ms: float | None = None
    accept_len: float | None = None
    alpha: float | None = None
    num_draft: int | None = None
    survival: str | None = None
    draft_cost_ratio: float | None = None
    draft_ms: float | None = None
    overhead_ms: float | None = None
    batch: int | None = None
    baseline_tps: float | None = None
    decode_ms: float | None = None
    source: str | None = None  # --from: breakdown JSON or trace
    manifest: Path | None = None
    step: str | None = None
    step_range: str | None = None
    whole_trace: bool = False
    width: int | None = None
    mode: str | None = None
    hardware: str | None = None
    link: str | None = None
    model: str | None = None
    tp: int | None = None
    context: float | None = None
    drafter_gain: float | None = None  # None: better_drafter from published drafter data
    candidates: list[str] = field(default_factory=list)
    assume_capturable: bool = False  # graph and compile fixes on steps that sync or change shape
    # the load curve's batch sizes and context lengths (``--batch 1,8,32``, ``--context a,b``);
    # None: its defaults (1, 2, 4, ... while the KV cache fits; today's context and 4x)
    batches: tuple[int, ...] | None = None
    contexts: tuple[float, ...] | None = None
    # what the user declares of the captures (issue 41): program options that set a load axis
    # (``--load-option --bs=batch``: (name, axis)), and captures' contexts where they state none
    # (``--capture-context C1=512``: (label, tokens); label None: every capture that says none)
    load_options: tuple[tuple[str, str], ...] = ()
    capture_contexts: tuple[tuple[str | None, float], ...] = ()

    @property
    def decode_given(self) -> bool:
        """Plain decoding's rate given by the user (``--baseline-tps`` / ``--decode-ms``): it
        beats the trace's decode steps and the manifest's."""
        return self.baseline_tps is not None or self.decode_ms is not None


@dataclass
class Acceptance:
    """The accept length, where it came from (option > manifest > the trace) and the survival
    curve and drafts beside it: resolved once by the pipeline and handed to the model."""

    accept_len: float | None
    source: str
    survival: Survival | None = None
    num_draft: int | None = None

    @property
    def basis(self) -> str:
        """Whether the accept length is "given" (``--accept-len``, ``--alpha``/``--num-draft``,
        ``--survival``) or "measured" (the manifest's, the trace's)."""
        return "given" if self.source.startswith(("--", "Eq. 1")) else "measured"


def _check_options(o: WhatifOptions) -> None:
    check_fields(o)  # every number within its documented range (contracts/bounds.py)
    if o.verify_ms is not None:
        check_positive("--verify-ms", o.verify_ms)
    if o.accept_len is not None:
        check_accept_len(o.accept_len)
    if o.alpha is not None:
        check_alpha(o.alpha)
    if o.num_draft is not None:
        check_count("--num-draft", o.num_draft, minimum=1, maximum=MAX_DRAFTS)
        if o.accept_len is not None and o.accept_len > o.num_draft + 1:
            raise VerifyprofError(
                f"--accept-len {o.accept_len:g} cannot exceed --num-draft + 1 = {o.num_draft + 1} "
                "(accepted drafts plus the bonus token)"
            )
    if o.draft_cost_ratio is not None:
        check_nonnegative("--draft-cost-ratio", o.draft_cost_ratio)
    for name, value in (("--draft-ms", o.draft_ms), ("--overhead-ms", o.overhead_ms)):
        if value is not None:
            check_nonnegative(name, value)
    if o.batch is not None:
        check_count("--batch", o.batch, minimum=1)
    if o.tp is not None:
        check_count("--tp", o.tp, minimum=1)
    if o.width is not None:
        check_count("--width", o.width, minimum=1)
    if o.context is not None:
        check_nonnegative("--context", o.context)
    if o.context == 0 or 0 in (o.contexts or ()):
        raise VerifyprofError(
            "--context 0: a request with no context holds no KV cache to read; give the tokens"
            " each request holds (1 or more)"
        )
    for b in o.batches or ():
        check_count("--batch", b, minimum=1)
    for c in o.contexts or ():
        check_number("--context", c, CONTEXT)
    if o.drafter_gain is not None:
        check_nonnegative("--drafter-gain", o.drafter_gain)
    if o.mode is not None and o.mode not in ("eager", "graph", "compile"):
        raise VerifyprofError(f"--mode must be eager, graph or compile, got {o.mode!r}")
    given = [
        name
        for name, value in (
            ("--accept-len", o.accept_len),
            ("--alpha", o.alpha),
            ("--survival", o.survival),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise VerifyprofError(
            f"give one of --accept-len, --alpha/--num-draft, --survival (got {' and '.join(given)})"
        )
    if o.alpha is not None and o.num_draft is None:
        raise VerifyprofError("--alpha needs --num-draft K (Leviathan's Eq. 1 counts K drafts)")
    if o.draft_cost_ratio is not None and (o.alpha is None or o.num_draft is None):
        raise VerifyprofError(
            "--draft-cost-ratio needs --alpha and --num-draft (Leviathan's Thm 3.8)"
        )


def acceptance(
    o: WhatifOptions, manifest: Manifest | None = None, profile: VerifyProfile | None = None
) -> Acceptance:
    """Accept length and survival curve: options first, then the manifest, then the trace."""
    num_draft = o.num_draft
    if num_draft is None and manifest is not None and manifest.num_draft:
        num_draft = check_count(
            f"number of drafts in {manifest.path}",
            manifest.num_draft,
            minimum=1,
            maximum=MAX_DRAFTS,
        )
    if o.accept_len is not None:
        measured = manifest.accept_len if manifest is not None else None
        overridden = (
            f" (over {measured:g} measured in {manifest.path})"
            if measured is not None and measured != o.accept_len
            else ""
        )
        return Acceptance(o.accept_len, "--accept-len" + overridden, None, num_draft)
    if o.alpha is not None:
        assert o.num_draft is not None
        survival = Survival.from_alpha(o.alpha, o.num_draft)
        return Acceptance(
            expected_tokens(o.alpha, o.num_draft),
            f"Eq. 1 with alpha {o.alpha:g}, {o.num_draft} drafts",
            survival,
            o.num_draft,
        )
    survival = parse_survival(o.survival) if o.survival is not None else None
    source = "--survival"
    if survival is None and manifest is not None and manifest.survival:
        survival = Survival(manifest.survival, source=str(manifest.path))
        source = f"survival in {manifest.path}"
        if (
            manifest.accept_len is not None
        ):  # measured beats the curve's expectation; the curve stays for candidates
            return Acceptance(
                check_accept_len(manifest.accept_len),
                f"accept length in {manifest.path}",
                survival,
                num_draft or survival.depth,
            )
    if survival is not None:
        k = num_draft or survival.depth
        return Acceptance(
            survival.accept_len(k),
            f"{source}, {k} drafts" + (" (extrapolated)" if survival.is_extrapolated(k) else ""),
            survival,
            k,
        )
    if manifest is not None and manifest.accept_len is not None:
        return Acceptance(
            check_accept_len(manifest.accept_len),
            f"accept length in {manifest.path}",
            None,
            num_draft,
        )
    if profile is not None and profile.accept_len is not None:
        return Acceptance(
            check_accept_len(profile.accept_len),
            "accepted tokens recorded on the trace's ranges",
            None,
            num_draft,
        )
    return Acceptance(None, "", None, num_draft)


def known_acceptance(
    o: WhatifOptions, manifest: Manifest | None, profile: VerifyProfile
) -> Acceptance:
    """:func:`acceptance`; none known is refused, saying how to give it."""
    acc = acceptance(o, manifest, profile)
    if acc.accept_len is None:
        raise VerifyprofError(
            "accept length unknown: give --accept-len, --alpha/--num-draft, --survival or"
            " --manifest"
        )
    return acc


def today_batch(profile: VerifyProfile, batch: int | None) -> tuple[int, tuple[str, ...]]:
    """Today's batch and the note saying where it came from: the trace's (its steps' ``bs=``
    tag); one ``--batch`` number that contradicts it is refused (a list is the load curve's), one
    given where the trace does not say is named as the user's."""
    if batch is None:
        return profile.batch or 1, ()
    if profile.batch and batch != profile.batch:
        raise VerifyprofError(
            f"--batch {batch}: the trace's verify steps ran at batch {profile.batch} (their"
            " bs= tag); one --batch number names today's batch: give a list (--batch"
            f" {profile.batch},{batch}) for the load curve at other batches"
        )
    if not profile.batch:
        return batch, (f"batch {batch} as given (--batch): the trace does not tag its steps'",)
    return batch, ()


def check_options(o: WhatifOptions) -> None:
    """Reject bad options before any input is read."""
    _check_options(o)


def decode_inputs(o: WhatifOptions, manifest: Manifest | None) -> tuple[float | None, float | None]:
    """(baseline tok/s, decode ms) for plain decoding: an option beats the manifest, and either
    option silences both of the manifest's (the user said which rate to race)."""
    if o.decode_given or manifest is None:
        return o.baseline_tps, o.decode_ms
    baseline_tps = manifest.baseline_tps
    return baseline_tps, manifest.decode_ms if baseline_tps is None else None
