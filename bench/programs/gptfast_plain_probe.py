"""Why program B's plain decoding misses (issue 41): is one plain step of phillip-kravtsov's fork
the target's forward at width 1, as the model assumes when no plain capture exists?

The fork cannot decode plainly as launched, so verifyprof predicts plain decoding from the verify
(the same kernels over one token). This times, unprofiled, at each batch, with CUDA syncs around
``--iters`` repetitions after ``--warmup``, through the fork's own functions:

* ``decode_step``: what ``decode_n_tokens`` runs per token (its ``sdp_kernel`` context,
  ``decode_one_token``: forward + sampling, the two clones, two CUDA events);
* ``forward_w1``: ``model_forward`` at width 1 outside that context (the verify's path, one token);
* ``forward_w1_ctx``: the same forward inside the context (the context alone);
* ``forward_w5``: ``model_forward`` at width 5 (the verify at k = 4), outside it.

    python bench/programs/gptfast_plain_probe.py --program .ext/gptfast-batched \\
        --target CK/7B/model.pth --batches 1,8,32,64 --out OUT/plain_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def timed(fn, iters: int, warmup: int) -> float:
    """Mean milliseconds of ``fn()`` over ``iters`` calls, synced before and after."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3


def probe(gen, model, batch: int, context: int, a: argparse.Namespace) -> dict[str, float]:
    import torch

    model.max_batch_size, model.max_seq_length = -1, -1  # caches of this batch alone
    with torch.device("cuda"):  # as generate() makes them
        model.setup_caches(max_batch_size=batch, max_seq_length=context)
    x1 = torch.randint(100, 30000, (batch, 1), device="cuda", dtype=torch.int)
    x5 = torch.randint(100, 30000, (batch, 5), device="cuda", dtype=torch.int)
    pos1 = torch.full((batch, 1), 20, device="cuda", dtype=torch.int)
    pos5 = (20 + torch.arange(5, device="cuda", dtype=torch.int)).repeat(batch, 1)
    ctx = dict(enable_flash=True, enable_mem_efficient=False, enable_math=True)
    sampling = dict(temperature=a.temperature, top_k=a.top_k)

    def decode_step() -> None:  # decode_n_tokens' loop body
        with torch.backends.cuda.sdp_kernel(**ctx):
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            tok, prob = gen.decode_one_token(model, x1, pos1, **sampling)
            end.record()
        tok.clone()
        prob.clone()

    def forward_w1_ctx() -> None:
        with torch.backends.cuda.sdp_kernel(**ctx):
            gen.model_forward(model, x1, pos1, None)

    with torch.no_grad():
        return {
            "decode_step": timed(decode_step, a.iters, a.warmup),
            "forward_w1": timed(
                lambda: gen.model_forward(model, x1, pos1, None), a.iters, a.warmup
            ),
            "forward_w1_ctx": timed(forward_w1_ctx, a.iters, a.warmup),
            "forward_w5": timed(
                lambda: gen.model_forward(model, x5, pos5, None), a.iters, a.warmup
            ),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", type=Path, required=True)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--context", type=int, default=56, help="the caches' length (the sweep's)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.program, a.target, a.out = a.program.resolve(), a.target.resolve(), a.out.resolve()
    sys.path.insert(0, str(a.program))
    os.chdir(a.program)
    import generate as gen  # the fork's own module
    import torch

    model = gen._load_model(a.target, "cuda", torch.bfloat16, False)
    rows = []
    for b in (int(v) for v in a.batches.split(",")):
        row = {"batch": b, **probe(gen, model, b, a.context, a)}
        rows.append(row)
        print(
            " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
        )
    doc = {
        "program": str(a.program),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "unit": "ms per call, mean",
        "iters": a.iters,
        "context": a.context,
        "rows": rows,
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
