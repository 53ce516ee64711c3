"""The unprofiled truth for issue 41's external-program proof: a gpt-fast ``generate.py`` (upstream
at batch 1, or phillip-kravtsov's batched fork) driven through its OWN ``generate()`` at each
(batch, k) of a grid, the models loaded once per process, each configuration timed with CUDA
syncs around the call exactly as the program's ``main`` times a sample. k = 0 is plain decoding
(``draft_model=None``). Configurations run in interleaved rounds (drift hits all alike); the
first round is preceded by a short warm-up of each. One JSON file per process.

    python bench/programs/gptfast_sweep.py --program .ext/gptfast --flavour upstream \\
        --target CK/7B/model.pth --draft CK/stories15M/model.pth --batches 1 --ks 0,1,2,3,4,5,6 \\
        --out OUT/sweep-a-1.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", type=Path, required=True, help="the program's folder")
    ap.add_argument("--flavour", choices=("upstream", "batched"), required=True)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--draft", type=Path, required=True)
    ap.add_argument("--batches", default="1")
    ap.add_argument("--ks", default="0,1,2,3,4,5,6")
    ap.add_argument("--max-new-tokens", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-tokens", type=int, default=16)
    ap.add_argument("--prompt", default="the quick brown fox jumps over the lazy dog " * 2)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=200)
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--seed",
        type=int,
        default=1234,
        help="torch's seed: the sampled acceptance is one draw per seed (give each process its"
        " own, so that the processes' spread holds the draw's)",
    )
    ap.add_argument("--out", type=Path, required=True)
    return ap.parse_args(argv)


def _fresh_caches(*models) -> None:
    """As a new process would: caches sized for this configuration alone (the batched fork's
    cache, once larger, would otherwise serve smaller batches with the wrong shape)."""
    for m in models:
        if m is not None:
            m.max_batch_size, m.max_seq_length = -1, -1


def run_one(gen, models, encoded, batch: int, k: int, new_tokens: int, a) -> dict:
    import torch

    model, draft = models
    draft = draft if k > 0 else None
    _fresh_caches(model, draft)
    kwargs = dict(
        interactive=False,
        draft_model=draft,
        speculate_k=max(k, 1) if draft is None else k,
        temperature=a.temperature,
        top_k=a.top_k,
    )
    args = (model, encoded, new_tokens)
    if a.flavour == "batched":  # its own default callback: main's callback=None breaks k = 0
        kwargs["batch_size"] = batch
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    y, stats = gen.generate(*args, **kwargs)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    prompt_len = encoded.size(-1)
    if a.flavour == "batched":  # the fork's count: every row's tokens beyond the prompt
        tokens = sum(len(row) - prompt_len for row in y)
    else:
        tokens = y.size(0) - prompt_len
    counts = stats.get("accept_counts") or []
    verifies = sum(counts)
    return {
        "batch": batch,
        "k": k,
        "tokens": int(tokens),
        "seconds": seconds,
        "tok_s": tokens / seconds,
        "tok_s_per_request": tokens / seconds / batch,
        "verifies": verifies if k else 0,
        "mean_accepted": (
            sum(i * c for i, c in enumerate(counts)) / verifies if k and verifies else None
        ),
        "accept_counts": counts if k else None,
    }


def write(a: argparse.Namespace, rows: list[dict], grid: list, extra: dict) -> dict:
    """The JSON so far (rewritten after every run: a process stopped at a deadline keeps them)."""
    import torch

    summary = []
    for b, k in grid:
        mine = [x for x in rows if x["batch"] == b and x["k"] == k]
        if not mine:
            continue
        accs = [x["mean_accepted"] for x in mine if x["mean_accepted"] is not None]
        summary.append(
            {
                "batch": b,
                "k": k,
                "runs": len(mine),
                "tok_s": statistics.median(x["tok_s"] for x in mine),
                "tok_s_per_request": statistics.median(x["tok_s_per_request"] for x in mine),
                "mean_accepted": statistics.mean(accs) if accs else None,
            }
        )
    doc = {
        "program": str(a.program.resolve()),
        "pinned": (a.program / "PINNED").read_text().strip()
        if (a.program / "PINNED").is_file()
        else None,
        "flavour": a.flavour,
        "target": str(a.target),
        "draft": str(a.draft),
        "prompt": a.prompt,
        "max_new_tokens": a.max_new_tokens,
        "temperature": a.temperature,
        "seed": a.seed,
        "top_k": a.top_k,
        "rounds": a.rounds,
        "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device,
        "torch": torch.__version__,
        **extra,
        "summary": summary,
        "rows": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".part")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(a.out)
    return doc


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    a.program, a.target, a.draft, a.out = (
        p.resolve() for p in (a.program, a.target, a.draft, a.out)
    )
    program, target, draft = a.program, a.target, a.draft
    sys.path.insert(0, str(program))
    os.chdir(program)
    import torch

    t0 = time.perf_counter()
    import generate as gen  # the program's own module, its own generate()

    models = (
        gen._load_model(target, a.device, torch.bfloat16, False),
        gen._load_model(draft, a.device, torch.bfloat16, False),
    )
    from sentencepiece import SentencePieceProcessor

    tok = SentencePieceProcessor(model_file=str(target.parent / "tokenizer.model"))
    encoded = gen.encode_tokens(tok, a.prompt, bos=True, device=a.device)
    load_s = time.perf_counter() - t0
    batches = [int(b) for b in a.batches.split(",")]
    ks = [int(k) for k in a.ks.split(",")]
    if encoded.size(-1) in batches and a.flavour == "batched":
        print(
            f"gptfast_sweep: the prompt's {encoded.size(-1)} tokens equal a batch size: the"
            " fork would take the prompt as a batch; give another --prompt"
        )
        return 2
    grid = [(b, k) for b in batches for k in ks]
    rows: list[dict] = []
    torch.manual_seed(a.seed)
    for b, k in grid:  # warm-up: first launches, cuBLAS handles, allocator
        run_one(gen, models, encoded, b, k, a.warmup_tokens, a)
    for r in range(a.rounds):
        for b, k in grid:
            row = run_one(gen, models, encoded, b, k, a.max_new_tokens, a) | {"round": r}
            rows.append(row)
            write(
                a,
                rows,
                grid,
                {"load_s": load_s, "prompt_tokens": int(encoded.size(-1)), "complete": False},
            )
            acc = row["mean_accepted"]
            print(
                f"round {r} batch {b:3d} k {k}: {row['tok_s']:9.1f} tok/s"
                f" ({row['tok_s_per_request']:7.1f}/request)"
                + (f", {acc:.2f} accepted drafts/verify" if acc is not None else ""),
                flush=True,
            )
    doc = write(
        a,
        rows,
        grid,
        {
            "load_s": load_s,
            "prompt_tokens": int(encoded.size(-1)),
            "wall_s": time.perf_counter() - t0,
            "complete": True,
        },
    )
    print(f"gptfast_sweep: {len(rows)} runs in {doc['wall_s']:.0f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
