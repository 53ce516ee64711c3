"""Model and run configuration of the workload, as plain dataclasses (recorded in the summary)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """A decoder LM's shape. ``moe_experts == 0`` means dense SwiGLU MLPs in every layer."""

    layers: int = 16
    hidden: int = 2048
    heads: int = 16
    kv_heads: int = 16
    intermediate: int = 5632
    vocab: int = 32000
    moe_experts: int = 0
    moe_topk: int = 2
    moe_intermediate: int = 1408
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def validate(self, tp: int = 1) -> None:
        problems = []
        if self.hidden % self.heads:
            problems.append(f"hidden {self.hidden} not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            problems.append(f"heads {self.heads} not divisible by kv_heads {self.kv_heads}")
        if self.moe_experts and not 0 < self.moe_topk <= self.moe_experts:
            problems.append(f"moe_topk {self.moe_topk} not in 1..{self.moe_experts}")
        for name in ("heads", "kv_heads", "intermediate", "vocab", "moe_intermediate"):
            if getattr(self, name) % tp:
                problems.append(
                    f"{name} {getattr(self, name)} not divisible by tensor-parallel size {tp}"
                )
        if problems:
            raise ValueError("; ".join(problems))

    def params(self) -> int:
        """Parameter count of the full (unsharded) model."""
        attn = (
            self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
            + self.hidden * self.hidden
        )
        if self.moe_experts:
            mlp = (
                self.hidden * self.moe_experts
                + self.moe_experts * 3 * self.hidden * self.moe_intermediate
            )
        else:
            mlp = 3 * self.hidden * self.intermediate
        return (
            self.layers * (attn + mlp + 2 * self.hidden)
            + 2 * self.vocab * self.hidden
            + self.hidden
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"head_dim": self.head_dim, "params": self.params()}


# A config small enough for CPU tests (a verify forward takes about a millisecond).
TINY = ModelConfig(
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    intermediate=128,
    vocab=256,
    moe_topk=2,
    moe_intermediate=32,
)
TINY_DRAFT = ModelConfig(
    layers=1, hidden=32, heads=2, kv_heads=2, intermediate=64, vocab=256, seed=1
)

# The H200 default: a 16-layer 2048-wide target (about 1B parameters) and a 2-layer drafter.
DEFAULT = ModelConfig()
DEFAULT_DRAFT = ModelConfig(layers=2, hidden=1024, heads=8, kv_heads=8, intermediate=2816, seed=1)


# eager; graph: each phase captured once as a CUDA graph and replayed; compile: the verify forward
# under torch.compile (the other phases eager), measured in the same process as the others.
MODES = ("eager", "graph", "compile")


@dataclass(frozen=True)
class RunConfig:
    """What to run: modes, steps, speculation and sweep settings."""

    modes: tuple[str, ...] = ("eager",)
    steps: int = 40
    warmup: int = 5
    decode_steps: int = 40
    num_draft: int = 3
    accept_len: float | None = 2.0  # None: greedy matching of drafts against the target's argmax
    accept_method: str = "geometric"
    batch: int = 1
    context: int = 512
    widths: tuple[int, ...] = (1, 2, 4, 8, 16)
    sweep_steps: int = 10
    ranges: bool = True
    seed: int = 0
    moe_impl: str = "auto"
    pipelined: int = 0  # verify forwards per mode launched back to back, no host sync between them
    compile_backend: str = "inductor"  # torch.compile of the verify forward in mode "compile"
    compile_mode: str | None = (
        "reduce-overhead"  # inductor only; reduce-overhead = CUDA graphs on CUDA
    )
    compile_fullgraph: bool = True

    def validate(self) -> None:
        problems = []
        for mode in self.modes:
            if mode not in MODES:
                problems.append(f"unknown mode {mode!r} ({', '.join(MODES)})")
        if self.num_draft < 1:
            problems.append("num_draft must be at least 1")
        if self.accept_len is not None and not 1.0 <= self.accept_len <= self.num_draft + 1:
            problems.append(
                f"accept_len {self.accept_len} outside [1, num_draft + 1 = {self.num_draft + 1}]"
            )
        if min(self.steps, self.warmup, self.decode_steps, self.sweep_steps, self.pipelined) < 0:
            problems.append("steps, warmup, decode_steps, sweep_steps and pipelined must be >= 0")
        elif not (
            self.steps or self.decode_steps or self.pipelined or (self.sweep_steps and self.widths)
        ):
            problems.append(
                "nothing to measure: steps, decode_steps, pipelined and the sweep are all 0"
            )
        if self.batch < 1 or self.context < 1:
            problems.append("batch and context must be >= 1")
        if any(w < 1 for w in self.widths):
            problems.append("sweep widths must be >= 1")
        if problems:
            raise ValueError("; ".join(problems))

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["modes"] = list(self.modes)
        out["widths"] = list(self.widths)
        return out
