"""One speculative iteration as device-side phases over static buffers (chain drafting, topk 1).

Invariant between iterations: the target's and the drafter's KV caches hold every token of
each sequence except the last one, ``last`` (the bonus token of the previous iteration);
``target_len`` = ``draft_len`` = that count. One iteration:

1. draft: the drafter decodes k tokens autoregressively from ``last`` (k one-token forwards).
2. verify: the target runs ``[last, d_0 .. d_{k-1}]`` (k+1 tokens) in one forward.
3. accept: a = accepted drafts (greedy: the leading drafts equal to the target's argmax, or a
   simulated count); emit ``d_0 .. d_{a-1}`` plus the bonus ``argmax[a]``; ``target_len += a+1``.
4. draft-extend: the drafter re-runs the verified window at the fixed width k+1 so its cache
   holds exactly the accepted prefix (as EAGLE's DRAFT_EXTEND; a fixed width keeps it
   capturable); ``draft_len = target_len``. Rejected positions stay in both caches but lie
   beyond the lengths, so the mask hides them and the next iteration overwrites them.

Every phase only reads and writes tensors held here, and none syncs with the host, so each
can be captured in a CUDA graph; the runner decides which (``graphs.py``).
"""

from __future__ import annotations

import torch

from verifyprof.workload.model import DecoderLM


class SpecState:
    def __init__(
        self,
        target: DecoderLM,
        draft: DecoderLM | None,
        *,
        batch: int,
        num_draft: int,
        max_len: int,
        max_width: int = 1,
    ):
        self.target, self.draft, self.batch, self.k = target, draft, batch, num_draft
        device = target.device
        target.allocate(batch, max_len)
        if draft is not None:
            draft.allocate(batch, max_len)

        def longs(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.int64, device=device)

        self.last = longs(batch, 1)  # the newest token, not yet in either cache
        self.target_len = longs(batch)
        self.draft_len = longs(batch)
        self.cursor = longs(batch)  # the drafter's write position while drafting
        self.draft_token = longs(batch, 1)
        self.drafts = longs(batch, num_draft)
        self.verify_tokens = longs(batch, num_draft + 1)
        self.accepted = longs(batch)  # a: accepted drafts of the last iteration
        self.accept_len = longs(batch)  # a + 1, the tokens emitted by the last iteration
        self.sim_accepted = longs(
            batch
        )  # simulated a for the next accept (copied in by the runner)
        # Emitted tokens per sequence; the last column is a sink for the unaccepted positions.
        self.out = longs(batch, max_len + 1)
        self.n_out = longs(batch)
        self.sweep_tokens = torch.randint(
            0,
            target.cfg.vocab,
            (batch, max_width),
            device=device,
            generator=torch.Generator(device=device).manual_seed(7),
        )
        self.window = torch.arange(num_draft + 1, device=device)[None, :]
        self._saved: dict[str, torch.Tensor] = {}

    # -- prefill and resets (eager, outside any measured step) ---------------------------------

    def prefill(self, context: torch.Tensor) -> None:
        """Run the context through both models and take the target's next token as ``last``."""
        zero = torch.zeros_like(self.target_len)
        logits = self.target(context, zero, logits="last")
        if self.draft is not None:
            self.draft(context, zero, logits="none")
        self.last.copy_(logits.argmax(-1))
        self.target_len.fill_(context.shape[1])
        self.draft_len.fill_(context.shape[1])
        self.n_out.zero_()
        self._saved = {
            name: getattr(self, name).clone()
            for name in ("last", "target_len", "draft_len", "n_out")
        }

    def reset(self) -> None:
        """Back to the state right after prefill (the caches beyond the lengths are don't-care)."""
        for name, value in self._saved.items():
            getattr(self, name).copy_(value)

    # -- the phases -----------------------------------------------------------------------------

    def draft_begin(self) -> None:
        self.cursor.copy_(self.draft_len)
        self.draft_token.copy_(self.last)

    def draft_step(self) -> None:
        """One drafter decode forward: the next draft token, written at its slot in ``drafts``."""
        logits = self.draft(self.draft_token, self.cursor, logits="last")
        token = logits[:, -1].argmax(-1, keepdim=True)
        self.drafts.scatter_(1, (self.cursor - self.draft_len)[:, None], token)
        self.draft_token.copy_(token)
        self.cursor.add_(1)

    def verify(self) -> torch.Tensor:
        """The target forward over ``[last, drafts]``: logits ``[B, k+1, V]``."""
        self.verify_tokens[:, :1].copy_(self.last)
        self.verify_tokens[:, 1:].copy_(self.drafts)
        return self.target(self.verify_tokens, self.target_len, logits="all")

    def verify_width(self, width: int) -> torch.Tensor:
        """A verify-shaped target forward at any width (the t(n) sweep); the lengths do not move."""
        return self.target(self.sweep_tokens[:, :width], self.target_len, logits="all")

    def accept(self, logits: torch.Tensor, simulated: bool) -> torch.Tensor:
        """Choose the accepted prefix, emit it, advance the target; returns ``accept_len``
        (device)."""
        best = logits.argmax(-1)  # [B, k+1]
        if simulated:
            accepted = self.sim_accepted
        else:
            accepted = (self.drafts == best[:, :-1]).to(torch.int64).cumprod(1).sum(1)
        proposed = torch.cat((self.drafts, best[:, -1:]), dim=1)
        emitted = torch.where(self.window < accepted[:, None], proposed, best)
        sink = self.out.shape[1] - 1
        slots = torch.where(
            self.window <= accepted[:, None], self.n_out[:, None] + self.window, sink
        )
        self.out.scatter_(1, slots, emitted)
        self.last.copy_(best.gather(1, accepted[:, None]))
        self.accepted.copy_(accepted)
        self.accept_len.copy_(accepted + 1)
        self.n_out.add_(self.accept_len)
        self.target_len.add_(self.accept_len)
        return self.accept_len

    def draft_extend(self) -> None:
        self.draft(self.verify_tokens, self.draft_len, logits="none")
        self.draft_len.copy_(self.target_len)

    def decode(self) -> torch.Tensor:
        """One plain target decode step (the non-speculative baseline): greedy next token."""
        logits = self.target(self.last, self.target_len, logits="last")
        token = logits[:, -1].argmax(-1, keepdim=True)
        self.out.scatter_(1, self.n_out[:, None], token)
        self.last.copy_(token)
        self.n_out.add_(1)
        self.target_len.add_(1)
        return token

    def emitted(self) -> list[list[int]]:
        """The tokens emitted so far, per sequence (syncs)."""
        counts = self.n_out.tolist()
        rows = self.out.tolist()
        return [row[:n] for row, n in zip(rows, counts)]
