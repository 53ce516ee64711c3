"""Model configs (``data/models/*.toml``): the dimensions that set verify's bytes, FLOPs and
allreduces.

Only what the cost models use is described: per-layer attention and MLP shapes, the MoE layout,
and the dtypes weights and KV are stored in. Counts follow the HF configs (REFERENCE 6.10);
the derived sizes reproduce REFERENCE 6.11 (MLA ~101M params/layer, a Kimi-K2 expert 44.0M).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyprof.contracts.bounds import check_count, check_nonnegative
from verifyprof.contracts.datafiles import require
from verifyprof.contracts.errors import VerifyprofError

DTYPE_BYTES = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}


@dataclass(frozen=True)
class Attention:
    kind: str  # "mla" | "gqa" (MHA is gqa with kv_heads = heads)
    heads: int
    kv_heads: int = 0
    head_dim: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0


@dataclass(frozen=True)
class Moe:
    experts: int
    top_k: int
    intermediate: int
    shared_experts: int = 0


def expert_union(tokens: float, experts: int, top_k: int) -> float:
    """Expected distinct experts per MoE layer touched by ``tokens`` tokens routing top-k of E
    uniformly."""
    check_nonnegative("tokens", tokens)
    check_count("experts", experts)
    check_count("top-k", top_k)
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    path: Path
    layers: int
    hidden: int
    vocab: int
    intermediate: int  # dense (gated) FFN width
    attention: Attention
    moe: Moe | None = None
    dense_layers: int = 0  # leading layers with a dense FFN when the rest are MoE
    dense_dtype: str = "bf16"
    expert_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    gated_mlp: bool = True
    source: str = ""

    # ---- parameter counts -------------------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        a, h = self.attention, self.hidden
        if a.kind == "mla":
            q = h * a.q_lora_rank + a.q_lora_rank * a.heads * (
                a.qk_nope_head_dim + a.qk_rope_head_dim
            )
            if not a.q_lora_rank:
                q = h * a.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
            kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * a.heads * (
                a.qk_nope_head_dim + a.v_head_dim
            )
            return q + kv + a.heads * a.v_head_dim * h
        return h * a.heads * a.head_dim * 2 + h * a.kv_heads * a.head_dim * 2

    def _mlp_params(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    @property
    def dense_ffn_params(self) -> int:
        return self._mlp_params(self.intermediate)

    @property
    def expert_params(self) -> int:
        return 0 if self.moe is None else self._mlp_params(self.moe.intermediate)

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.dense_layers

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def non_routed_params(self) -> int:
        """Weights every forward reads once, whatever the width: attention, dense/shared MLPs,
        lm_head."""
        dense_mlp_layers = self.layers if self.moe is None else self.dense_layers
        shared = (
            0
            if self.moe is None
            else self.moe.shared_experts * self.expert_params * self.moe_layers
        )
        return (
            self.attention_params_per_layer * self.layers
            + self.dense_ffn_params * dense_mlp_layers
            + shared
            + self.lm_head_params
        )

    @property
    def allreduces_per_forward(self) -> int:
        """Megatron TP: after o_proj and after the MLP/MoE of every layer, plus the vocab-parallel
        embedding."""
        return 2 * self.layers + 1

    # ---- bytes and FLOPs of one forward over `tokens` tokens, per GPU under TP -----------
    def expert_union(self, tokens: float) -> float:
        return 0.0 if self.moe is None else expert_union(tokens, self.moe.experts, self.moe.top_k)

    def routed_bytes(self, tokens: float, tp: int = 1) -> float:
        """Routed-expert weights read: each MoE layer reads the union D(tokens) of touched
        experts."""
        if self.moe is None:
            return 0.0
        return (
            self.moe_layers
            * self.expert_union(tokens)
            * self.expert_params
            * DTYPE_BYTES[self.expert_dtype]
            / tp
        )

    def dense_bytes(self, tp: int = 1) -> float:
        return self.non_routed_params * DTYPE_BYTES[self.dense_dtype] / tp

    def dense_flops(self, tokens: float, tp: int = 1) -> float:
        return 2.0 * tokens * self.non_routed_params / tp

    def routed_flops(self, tokens: float, tp: int = 1) -> float:
        if self.moe is None:
            return 0.0
        return 2.0 * tokens * self.moe.top_k * self.expert_params * self.moe_layers / tp

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """KV cache bytes per context token, all layers, per GPU (MLA's latent is replicated across
        TP)."""
        a = self.attention
        if a.kind == "mla":
            per_layer = a.kv_lora_rank + a.qk_rope_head_dim
        else:
            per_layer = 2 * max(a.kv_heads // tp, 1) * a.head_dim
        return per_layer * self.layers * DTYPE_BYTES[self.kv_dtype]

    def attention_flops(self, tokens: float, context: float, tp: int = 1) -> float:
        """Score and value products of ``tokens`` queries over ``context`` keys (MLA absorbed
        form)."""
        a = self.attention
        heads = max(a.heads // tp, 1)
        if a.kind == "mla":
            per_key = 2 * (a.kv_lora_rank + a.qk_rope_head_dim) + 2 * a.kv_lora_rank
        else:
            per_key = 4 * a.head_dim
        return float(tokens) * context * heads * per_key * self.layers

    def activation_bytes_per_token(self) -> float:
        return self.hidden * DTYPE_BYTES[self.activation_dtype]


def model_config_of(data: dict[str, Any], path: Path) -> ModelConfig:
    """A model file's tables (read from ``path`` by the pipeline: :mod:`verifyprof.pipeline.
    data_files`) as a :class:`ModelConfig`."""
    attn = require(data, "attention", path, dict)
    kind = require(attn, "kind", path, str)
    if kind not in ("mla", "gqa", "mha"):
        raise VerifyprofError(f"attention.kind must be mla, gqa or mha, got {kind!r}", path)
    heads = int(require(attn, "heads", path, int))
    if kind == "mla":
        attention = Attention(
            kind="mla",
            heads=heads,
            q_lora_rank=int(attn.get("q_lora_rank", 0)),
            kv_lora_rank=int(require(attn, "kv_lora_rank", path, int)),
            qk_nope_head_dim=int(require(attn, "qk_nope_head_dim", path, int)),
            qk_rope_head_dim=int(require(attn, "qk_rope_head_dim", path, int)),
            v_head_dim=int(require(attn, "v_head_dim", path, int)),
        )
    else:
        attention = Attention(
            kind="gqa",
            heads=heads,
            kv_heads=int(attn.get("kv_heads", heads)),
            head_dim=int(attn.get("head_dim", int(require(data, "hidden", path, int)) // heads)),
        )
    moe = None
    if "moe" in data:
        m = require(data, "moe", path, dict)
        moe = Moe(
            experts=int(require(m, "experts", path, int)),
            top_k=int(require(m, "top_k", path, int)),
            intermediate=int(require(m, "intermediate", path, int)),
            shared_experts=int(m.get("shared_experts", 0)),
        )
        if not 1 <= moe.top_k <= moe.experts:
            raise VerifyprofError(f"moe.top_k must be in [1, experts], got {moe.top_k}", path)
    dtypes = data.get("dtype", {})
    for key, value in dtypes.items():
        if value not in DTYPE_BYTES:
            raise VerifyprofError(
                f"dtype.{key}: unknown dtype {value!r} (known: {', '.join(DTYPE_BYTES)})", path
            )
    return ModelConfig(
        name=require(data, "name", path, str),
        path=path,
        layers=int(require(data, "layers", path, int)),
        hidden=int(require(data, "hidden", path, int)),
        vocab=int(require(data, "vocab", path, int)),
        intermediate=int(data.get("intermediate", 0)),
        attention=attention,
        moe=moe,
        dense_layers=int(data.get("dense_layers", 0)),
        dense_dtype=dtypes.get("dense", "bf16"),
        expert_dtype=dtypes.get("experts", dtypes.get("dense", "bf16")),
        kv_dtype=dtypes.get("kv", "bf16"),
        activation_dtype=dtypes.get("activations", "bf16"),
        gated_mlp=bool(data.get("gated_mlp", True)),
        source=str(data.get("source", "")),
    )


def model_from_workload(config: dict[str, Any], path: Path, dtype: str = "bf16") -> ModelConfig:
    """The model config of a workload run, from its summary's ``config.target``
    (``verifyprof/workload``)."""
    try:
        moe = None
        if int(config.get("moe_experts", 0)):
            moe = Moe(
                experts=int(config["moe_experts"]),
                top_k=int(config["moe_topk"]),
                intermediate=int(config["moe_intermediate"]),
            )
        heads = int(config["heads"])
        return ModelConfig(
            name=f"workload {config['layers']}x{config['hidden']}"
            + (f" moe{moe.experts}/top{moe.top_k}" if moe else ""),
            path=path,
            layers=int(config["layers"]),
            hidden=int(config["hidden"]),
            vocab=int(config["vocab"]),
            intermediate=int(config["intermediate"]),
            attention=Attention(
                kind="gqa",
                heads=heads,
                kv_heads=int(config.get("kv_heads", heads)),
                head_dim=int(config.get("head_dim", int(config["hidden"]) // heads)),
            ),
            moe=moe,
            dense_dtype=dtype,
            expert_dtype=dtype,
            kv_dtype=dtype,
            activation_dtype=dtype,
            source="workload summary",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise VerifyprofError(
            f"workload summary: config.target lacks or mangles {exc}", path
        ) from None
