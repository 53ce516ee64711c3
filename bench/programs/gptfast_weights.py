"""Random-weight checkpoints for gpt-fast's ``generate.py`` whose target and drafter AGREE, so that
speculative decoding accepts drafts as it would with a real model pair (issue 41, item 4).

Independent random weights accept almost nothing. Here every model shares one low-rank bigram:
a unit embedding ``E0`` (vocab x r) and an output ``W0`` (vocab x r). A model of width d gets
``tok_embeddings = sqrt(d) E0 P`` and ``output = (W0 + eps N0) P`` with ``P`` (r x d) of
orthonormal rows, and a final norm weight of ``1/sqrt(d)``: its logits are ``c W0 e`` whatever d,
plus ``c eps N0 e`` for the target. The layers run at full cost but add little: ``wo`` and ``w2``
are scaled by ``--layer-scale``. ``c`` (``--logit-scale``) and ``eps`` (``--target-noise``) set
the acceptance: at c = 3, temperature 0.8 and top-k 200, eps = 0.15 gives sum(min(p, q)) of about
0.78 (about 2.2 accepted drafts per verify at k = 4) before the layers' share.

The folder's name picks gpt-fast's config (``ModelArgs.from_name``); the model's parameter
names and shapes come from the program's own ``model.py`` (``--program``). Each folder also gets
a ``tokenizer.model``: a SentencePiece model of exactly ``vocab_size`` pieces, so that any id
decodes.

    python bench/programs/gptfast_weights.py --program .ext/gptfast --out checkpoints \\
        --model 7B:target --model stories15M:draft --device cuda
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import random
import sys
import time
import zlib
from pathlib import Path

import torch

RANK = 256
EOS_ID = 2  # the batched fork stops a row at id 2: the bigram never proposes it
WORDS = (
    "the quick brown fox jumps over a lazy dog hello my name is write quicksort in python you are "
    "an expert programmer system inst here some irrelevant info update input sequences tensors"
).split()


def load_program_model(program: Path):
    """The program's own model.py, imported from its folder (not from sys.path)."""
    spec = importlib.util.spec_from_file_location("gptfast_model_for_weights", program / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokenizer_bytes(vocab: int) -> bytes:
    """A SentencePiece model with exactly ``vocab`` pieces (byte fallback: any text encodes)."""
    import sentencepiece as spm

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(2000)]
    extra = vocab - 420
    for _ in range(4):
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=buf,
            vocab_size=vocab,
            model_type="bpe",
            byte_fallback=True,
            hard_vocab_limit=False,
            user_defined_symbols=[f"<t{i}>" for i in range(extra)],
            minloglevel=2,
        )
        size = spm.SentencePieceProcessor(model_proto=buf.getvalue()).get_piece_size()
        if size == vocab:
            return buf.getvalue()
        extra += vocab - size
    raise SystemExit(f"gptfast_weights: tokenizer has {size} pieces, wanted {vocab}")


def shared_bigram(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E0 (unit rows), W0 (EOS row zero) and the target's noise N0, the same for every model."""
    g = torch.Generator().manual_seed(seed)
    e0 = torch.randn(vocab, RANK, generator=g)
    e0 = e0 / e0.norm(dim=1, keepdim=True)
    w0 = torch.randn(vocab, RANK, generator=g)
    w0[EOS_ID] = 0
    n0 = torch.randn(vocab, RANK, generator=g)
    return e0, w0, n0


def model_state(module, name: str, role: str, bigram, args, device: str) -> dict[str, torch.Tensor]:
    """Every parameter of gpt-fast's Transformer for config ``name``, as the docstring says."""
    with torch.device("meta"):
        model = module.Transformer.from_name(name)
    dim = model.config.dim
    g = torch.Generator(device=device).manual_seed(args.seed + zlib.crc32(name.encode()))
    q, _ = torch.linalg.qr(torch.randn(dim, RANK, generator=g, device=device))
    proj = q.T.contiguous()  # r x d, orthonormal rows
    e0, w0, n0 = (t.to(device) for t in bigram)
    eps = args.target_noise if role == "target" else 0.0
    state = {}
    for key, p in model.state_dict().items():
        if key == "tok_embeddings.weight":
            t = math.sqrt(dim) * e0 @ proj
        elif key == "output.weight":
            t = args.logit_scale * (w0 + eps * n0) @ proj
        elif key == "norm.weight":
            t = torch.full(p.shape, 1 / math.sqrt(dim), device=device)
        elif key.endswith("norm.weight"):
            t = torch.ones(p.shape, device=device)
        else:
            fan_in = p.shape[-1]
            scale = args.layer_scale if key.endswith(("wo.weight", "w2.weight")) else 1.0
            t = torch.randn(p.shape, generator=g, device=device, dtype=torch.bfloat16)
            t = t * (scale / math.sqrt(fan_in))
        state[key] = t.to(torch.bfloat16).cpu()
    return state


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--program", type=Path, required=True, help="folder holding gpt-fast's model.py"
    )
    ap.add_argument("--out", type=Path, default=Path("checkpoints"))
    ap.add_argument("--model", action="append", required=True, help="NAME:target|draft")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logit-scale", type=float, default=3.0)
    ap.add_argument("--target-noise", type=float, default=0.15)
    ap.add_argument("--layer-scale", type=float, default=0.05)
    ap.add_argument("--force", action="store_true", help="rewrite checkpoints that exist")
    args = ap.parse_args(argv)
    module = load_program_model(args.program)
    vocab = module.ModelArgs().vocab_size
    bigram = shared_bigram(vocab, args.seed)
    tok = None
    for item in args.model:
        name, _, role = item.partition(":")
        if role not in ("target", "draft"):
            print(f"gptfast_weights: --model {item}: expected NAME:target or NAME:draft")
            return 2
        folder = args.out / name
        if (folder / "model.pth").is_file() and not args.force:
            print(f"gptfast_weights: {folder}/model.pth exists, kept")
            continue
        t0 = time.perf_counter()
        folder.mkdir(parents=True, exist_ok=True)
        tok = tok or tokenizer_bytes(vocab)
        (folder / "tokenizer.model").write_bytes(tok)
        state = model_state(module, name, role, bigram, args, args.device)
        part = folder / "model.pth.part"
        torch.save(state, part)
        part.replace(folder / "model.pth")
        size = sum(t.numel() for t in state.values()) * 2 / 1e9
        print(
            f"gptfast_weights: {folder}/model.pth ({role}, {size:.2f} GB) in "
            f"{time.perf_counter() - t0:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
