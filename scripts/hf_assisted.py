"""Transformers assisted generation (speculative decoding) on random-weight Llama models, made to
be captured: warm-up outside, measured runs inside one cudaProfilerStart/Stop window, and a
plain-decode baseline after it, all in one process.

    verifyprof capture --hooks hf-assisted --out traces/hf-assisted -- \\
        python scripts/hf_assisted.py --new-tokens 96 --runs 3

Random weights leave acceptance to chance: the default independent small draft almost never
agrees with the target (each verify still checks all ``--num-assistant-tokens`` drafts);
``--draft same`` is a copy of the target (every draft accepted) and ``--draft noisy`` a perturbed
copy (partial acceptance), both as costly as the target. The numbers
go to stdout, to ``--out`` and, under ``verifyprof capture``, to ``$VERIFYPROF_CAPTURE_DIR/
results.json``, which becomes the manifest's ``results`` (``accept_len`` = new tokens per target
forward, SGLang's definition, bonus token included; ``tokens_per_s``; ``baseline_tokens_per_s``).
Needs torch and transformers (5.x); runs on CPU too (``--device cpu``), without the profiler window.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--layers", type=int, default=16, help="target decoder layers")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument(
        "--draft",
        choices=("small", "noisy", "same"),
        default="small",
        help=(
            "small: an independent small random model (drafts almost never accepted); noisy: the"
            " target with --draft-noise added (partial acceptance, target-sized draft); same: a"
            " copy of the target"
        ),
    )
    p.add_argument(
        "--draft-noise",
        type=float,
        default=0.03,
        help="noisy draft: noise / weight std (smaller: more accepted)",
    )
    p.add_argument("--draft-layers", type=int, default=2)
    p.add_argument("--draft-hidden", type=int, default=512)
    p.add_argument(
        "--num-assistant-tokens",
        type=int,
        default=4,
        help="draft tokens per verify (constant schedule)",
    )
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=96)
    p.add_argument("--warmup", type=int, default=1, help="runs before the profiler window")
    p.add_argument("--runs", type=int, default=3, help="measured runs inside the profiler window")
    p.add_argument("--no-baseline", action="store_true", help="skip the plain-decode baseline")
    p.add_argument(
        "--dtype",
        choices=("bfloat16", "float16", "float32"),
        default=None,
        help="default: bfloat16 on GPU, float32 on CPU",
    )
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the summary JSON here")
    return p.parse_args(argv)


def build_models(args: argparse.Namespace, torch, transformers, device, dtype):
    def llama(layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int):
        config = transformers.LlamaConfig(
            vocab_size=args.vocab,
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            max_position_embeddings=4096,
            bos_token_id=1,
            eos_token_id=None,
            pad_token_id=0,
        )
        model = transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
        model.generation_config.eos_token_id = (
            None  # never stop early: every run makes --new-tokens
        )
        model.generation_config.pad_token_id = 0
        return model

    torch.manual_seed(args.seed)
    target = llama(args.layers, args.hidden, args.heads, args.kv_heads, args.intermediate)
    if args.draft in ("same", "noisy"):
        # A separate module (so its forwards are not counted as the target's) with the target's
        # weights, exact ("same": every draft accepted) or perturbed by --draft-noise x each
        # weight's own scale ("noisy": agreement falls as the noise grows).
        draft = llama(args.layers, args.hidden, args.heads, args.kv_heads, args.intermediate)
        draft.load_state_dict(target.state_dict())
        if args.draft == "noisy":
            with torch.no_grad():
                for weight in draft.parameters():
                    weight.add_(
                        torch.randn_like(weight)
                        * weight.float().std().to(weight.dtype)
                        * args.draft_noise
                    )
        return target, draft
    draft_heads = max(1, args.draft_hidden // 64)
    draft = llama(
        args.draft_layers, args.draft_hidden, draft_heads, draft_heads, args.draft_hidden * 4
    )
    return target, draft


class ForwardCounter:
    """Target forwards = verify steps: each assisted-decoding iteration runs the target once."""

    def __init__(self, model) -> None:
        self.count = 0
        self.handle = model.register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        self.count += 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import transformers

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    cuda = device.type == "cuda"
    target, draft = build_models(args, torch, transformers, device, dtype)
    generator = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(2, args.vocab, (1, args.prompt_len), generator=generator).to(device)
    mask = torch.ones_like(prompt)
    # The candidate generator reads these from the *assistant's* generation config. A fixed draft
    # length, and no early stop on low draft confidence (random weights are never confident).
    draft.generation_config.num_assistant_tokens = args.num_assistant_tokens
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    assisted = dict(
        assistant_model=draft,
        do_sample=False,
        max_new_tokens=args.new_tokens,
        min_new_tokens=args.new_tokens,
    )

    def timed(**kwargs) -> tuple[float, int, int]:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = target.generate(prompt, attention_mask=mask, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start, int(out.shape[1] - prompt.shape[1]), 0

    counter = ForwardCounter(target)
    for _ in range(args.warmup):
        timed(**assisted)
    runs = []
    if cuda:
        torch.cuda.cudart().cudaProfilerStart()
    try:
        for i in range(args.runs):
            before = counter.count
            if cuda:
                torch.cuda.nvtx.range_push(f"hf_assisted.generate run={i}")
            seconds, new_tokens, _ = timed(**assisted)
            if cuda:
                torch.cuda.nvtx.range_pop()
            verify = counter.count - before
            runs.append({"seconds": seconds, "new_tokens": new_tokens, "verify_steps": verify})
    finally:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
    counter.handle.remove()

    tokens = sum(r["new_tokens"] for r in runs)
    verify = sum(r["verify_steps"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    results = {
        "schema": "verifyprof.hf_assisted/1",
        "accept_len": tokens / verify if verify else None,
        "tokens_per_s": tokens / seconds if seconds else None,
        "verify_steps": verify,
        "new_tokens": tokens,
        "num_draft": args.num_assistant_tokens,
        "runs": runs,
    }
    if not args.no_baseline:
        base = [
            timed(do_sample=False, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
            for _ in range(max(1, args.runs))
        ]
        base_tokens, base_seconds = sum(b[1] for b in base), sum(b[0] for b in base)
        results["baseline_tokens_per_s"] = base_tokens / base_seconds if base_seconds else None
        results["decode_ms"] = 1000 * base_seconds / base_tokens if base_tokens else None
        if results["tokens_per_s"] and results["baseline_tokens_per_s"]:
            results["speedup_vs_decode"] = (
                results["tokens_per_s"] / results["baseline_tokens_per_s"]
            )
    results["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    results["env"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "dtype": str(dtype).removeprefix("torch."),
    }

    line = (
        f"assisted: accept_len {results['accept_len']:.3f} over {verify} verify steps, "
        f"{results['tokens_per_s']:.1f} tok/s"
    )
    if "baseline_tokens_per_s" in results:
        line += f"; plain decode {results['baseline_tokens_per_s']:.1f} tok/s"
    print(line)
    text = json.dumps(results, indent=1) + "\n"
    destinations = [args.out] if args.out else []
    if os.environ.get("VERIFYPROF_CAPTURE_DIR"):
        destinations.append(Path(os.environ["VERIFYPROF_CAPTURE_DIR"]) / "results.json")
    for path in destinations:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
