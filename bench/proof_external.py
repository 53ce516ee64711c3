"""Issue 41 item 4 on a GPU: verifyprof's several-captures path on two programs the project did not
write, launched with their own option names, and the unprofiled truth it must predict.

(A) pytorch-labs/gpt-fast ``generate.py`` (``.ext/gptfast``, batch-1 speculative decoding),
    captured at two draft counts through its own ``--speculate_k``;
(B) phillip-kravtsov/gpt-fast ``generate.py`` (``.ext/gptfast-batched``, batched speculative
    decoding), captured at two batch sizes through its own ``--batch_size``.

Both print their numbers and write no results.json: ``--result`` reads them from their output
("Average tokens/sec", "User tok/sec", "Mean Accepted", accepted drafts per verify). Weights are
random but AGREE (``programs/gptfast_weights.py``: a 7B target, stories15M for A and TinyLlama-1.1B
for B as drafters), made at the start of every invocation (a device machine starts bare).
User hooks on the programs' ``model.Transformer.forward`` (``generate.py`` runs as __main__):
prefill (width > 7), verify (the target at width k + 1, ``bs=``, ``tokens=``), draft_extend (B's
per-row drafter catch-up) and draft (every other drafter call, one range per drafted token).

Parts (``--only``, comma-separated; each invocation fits the device's 10 minutes as grouped):
  capA     capture --num-drafts 1,4 of A (``--legacy``: two plain captures, k substituted here)
  capB     capture --batches 1,8 of B
  sweepA1  A unprofiled, batch 1 x k 0..6, one process (sweepA2: the same, a second process)
  sweepB1  B unprofiled, batch 1..64 x k 0..6, one process (sweepB2: a second process)

Here, once (repo root): ``bash bench/programs/ext_programs.sh`` (.ext), the wheels of
adbc-driver-sqlite/-manager, orjson, msgspec and nvtx in ``.whl`` (device README, "wheels") and
``cp -r ../shared/device .device``; carry ``.ext``, ``.whl``, ``.device``. On the device, from the
repo root, each invocation (estimates for the full grids on an H100, from the smoke run):

  source .device/nsys-env.sh >/dev/null 2>&1; python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD \
    PYTHONUNBUFFERED=1 && python3 bench/proof_external.py --out /tmp/px --deadline 560 \
    --pack $OUT --only capA,sweepA1 2>&1 | tee $OUT/run1.log            # ~6.5 min
  (the same with --only capB,sweepA2 and run2.log: ~5.5 min; --only sweepB1,sweepB2 and
  run3.log: ~6 min; weights ~40 s of each)

Until ``capture --num-drafts`` exists, ``--legacy`` captures A as two plain captures
(``gf-k/k-1``, ``gf-k/k-4``). A sweep rewrites its JSON after every run, so a deadline keeps
what was measured.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / ".ext"
A, B = EXT / "gptfast", EXT / "gptfast-batched"
TARGET, DRAFT_A, DRAFT_B = "7B", "stories15M", "TinyLlama-1.1B-Chat-v1.0"
TARGET_DIM = 4096
KS = "0,1,2,3,4,5,6"
BATCHES = "1,2,4,8,16,32,64"
PROMPT = "the quick brown fox jumps over the lazy dog and writes a quicksort in python"
# B's capture runs the sweep's workload (one prompt, NEW_B tokens, the program's sampling):
# --samples-b samples of it, the first cold. Its accept length is then the one the sweep's rows
# decode at; B2 captured three other prompts at 48 tokens and accepted 3.39 at k=4 where the
# sweep took 2.58. B4 and B5 ran three samples; the fork's rate kept rising for five (bench/README,
# B5's probe), so three anchored batch 16 13.5% under its sweep: six from B6 on
SAMPLES_B = 6
# sweep process 1's seed and 2's: each its own draw of the sampled acceptance (B1-B7 shared one:
# B7's batch 1 k = 5 made 18.7 tok/s in both processes, between 27.8 at k = 4 and 23.8 at 6)
SEEDS = {"1": 1234, "2": 4321}
NEW_B = 32
SPLIT = 15 * 1024 * 1024  # files back from the device: at most 16 MiB each
RESULTS_A = [
    "tokens_per_s=Average tokens/sec: ([0-9.]+)",
    "accept_len=Mean Accepted: ([0-9.]+)",
]
BACKEND: list[str] = ["--backend", "nsys"]
SMOKE = False
DEVICE_A: list[str] = []  # generate.py's own default device (cuda where there is one)
RESULTS_B = [
    *RESULTS_A,
    "tokens_per_s_per_request=User tok/sec: ([0-9.]+)",
    # every sample's rate (its first is cold): the dilation takes their medians
    r"tokens_per_s_samples[]=Time for inference \d+: [0-9.]+ sec total, ([0-9.]+) tokens/sec",
]


def hooks(batched: bool) -> list[str]:
    """First rule that holds names the range: a width over the largest verify (k <= 6) is a
    prefill, the target's wider calls verify, the rest are the drafter's (with a drafter loaded
    the target never runs 1 wide: no decode rule, which would only be reported as never fired)."""
    fwd = "model:Transformer.forward"
    tags = "tokens=arg0.shape[-1];bs=arg0.shape[0]"
    target = f"self.config.dim == {TARGET_DIM}"
    out = [
        f"{fwd}=prefill;{tags};when=arg0.shape[-1] > 7",
        f"{fwd}=verify;{tags};when={target} and arg0.shape[-1] > 1",
    ]
    if batched:  # the fork's catch-up of one fully accepted row: model(x, pos, batch_index=i)
        out.append(f"{fwd}=draft_extend;{tags};when=batch_index is not None")
    return [*out, f"{fwd}=draft;{tags}"]


DEADLINE = [float("inf")]  # --deadline: perf_counter() past which no step starts or runs on


def sh(cmd: list[str], log: Path, cwd: Path | None = None, timeout: float = 580) -> int:
    """Run one step, its output to ``log`` (and its last lines echoed), timed."""
    t0 = time.perf_counter()
    timeout = min(timeout, DEADLINE[0] - t0)
    if timeout < 5:
        print(f"skipped (deadline): {shlex.join(cmd)[:160]}", flush=True)
        return 124
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ (cd {cwd or ROOT}) {shlex.join(cmd)}", flush=True)
    with log.open("w") as fh:
        try:
            code = subprocess.run(
                cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            code = 124
    tail = log.read_text(errors="replace").splitlines()[-12:]
    print("\n".join("    " + line[:200] for line in tail))
    print(f"  -> exit {code} in {time.perf_counter() - t0:.0f} s ({log.name})", flush=True)
    return code


def make_weights(ck: Path, parts: set[str], out: Path) -> None:
    maker = [sys.executable, str(ROOT / "bench/programs/gptfast_weights.py"), "--out", str(ck)]
    if parts & {"capA", "sweepA1", "sweepA2"}:
        sh(
            [
                *maker,
                "--program",
                str(A),
                "--model",
                f"{TARGET}:target",
                "--model",
                f"{DRAFT_A}:draft",
            ],
            out / "logs/weights-a.log",
        )
    if parts & {"capB", "sweepB1", "sweepB2"}:
        sh([*maker, "--program", str(A), "--model", f"{TARGET}:target"], out / "logs/weights.log")
        sh([*maker, "--program", str(B), "--model", f"{DRAFT_B}:draft"], out / "logs/weights-b.log")


def program_a(ck: Path, k: str | None, new: int, samples: int) -> list[str]:
    cmd = [
        sys.executable,
        "generate.py",
        "--checkpoint_path",
        str(ck / TARGET / "model.pth"),
        "--prompt",
        PROMPT,
        "--max_new_tokens",
        str(new),
        "--num_samples",
        str(samples),
        *DEVICE_A,
    ]
    if k is not None:
        cmd += ["--draft_checkpoint_path", str(ck / DRAFT_A / "model.pth"), "--speculate_k", k]
    return cmd


def program_b(ck: Path, batch: str, k: str | None, new: int, prompts: Path) -> list[str]:
    cmd = [
        sys.executable,
        "generate.py",
        "--batch_size",
        batch,
        "--checkpoint_path",
        str(ck / TARGET / "model.pth"),
        "--prompts",
        str(prompts),
        "--max_new_tokens",
        str(new),
    ]
    if k is not None:
        cmd += ["--draft_checkpoint_path", str(ck / DRAFT_B / "model.pth"), "--speculate_k", k]
    return cmd


def capture_cli(
    out: Path, hook_list: list[str], results: list[str], decode: list[str] | None, extra: list[str]
) -> list[str]:
    cli = [
        sys.executable,
        "-m",
        "verifyprof.cli",
        "capture",
        "--gzip",
        "--capture-all",
        "--accept-len-convention",
        "accepted_drafts",
        "--out",
        str(out),
        *BACKEND,
        *extra,
    ]
    if not SMOKE:  # the smoke run checks the programs and hooks on CUDA, not the baselines
        cli += ["--baseline-run"] + (["--decode-cmd", shlex.join(decode)] if decode else [])
    for h in hook_list:
        cli += ["--hook", h]
    for r in results:
        cli += ["--result", r]
    return cli


def cap_a(a: argparse.Namespace, ck: Path, out: Path) -> None:
    new, samples, ks = (16, 2, ["4"]) if a.smoke else (64, 3, ["1", "4"])
    decode = program_a(ck, None, new, samples)
    if a.legacy:  # today's capture: one plain capture per draft count, k substituted here
        for k in ks:
            cli = capture_cli(out / "gf-k" / f"k-{k}", hooks(False), RESULTS_A, decode, [])
            sh([*cli, "--", *program_a(ck, k, new, samples)], out / f"logs/capA-k{k}.log", A)
            whatif(out / "gf-k" / f"k-{k}", out / f"logs/whatif-a-k{k}.log")
        return
    cli = capture_cli(out / "gf-k", hooks(False), RESULTS_A, decode, ["--num-drafts", ",".join(ks)])
    sh([*cli, "--", *program_a(ck, "{num_draft}", new, samples)], out / "logs/capA.log", A)
    whatif(out / "gf-k", out / "logs/whatif-a.log")


def cap_b(a: argparse.Namespace, ck: Path, out: Path, prompts: Path) -> None:
    new, batches = (16, "2") if a.smoke else (NEW_B, a.batches_b)
    # no --decode-cmd: the fork cannot decode plainly as launched (its main passes callback=None,
    # which its decode_n_tokens calls: TypeError); the model predicts plain decoding
    extra = ["--batches", batches]
    if a.baseline_repeat_b > 1:  # several baseline processes: the anchor's spread between them
        extra += ["--baseline-repeat", str(a.baseline_repeat_b)]
    cli = capture_cli(out / "gfb-batch", hooks(True), RESULTS_B, None, extra)
    sh([*cli, "--", *program_b(ck, "{batch}", "4", new, prompts)], out / "logs/capB.log", B)
    whatif(out / "gfb-batch", out / "logs/whatif-b.log")


def whatif(folder: Path, log: Path) -> None:
    if folder.exists():
        sh([sys.executable, "-m", "verifyprof.cli", "whatif", str(folder)], log, timeout=240)


def sweep(a: argparse.Namespace, ck: Path, out: Path, part: str) -> None:
    batched = part.startswith("sweepB")
    prog, draft = (B, DRAFT_B) if batched else (A, DRAFT_A)
    if a.smoke:
        grid = [
            "--batches",
            "1,4" if batched else "1",
            "--ks",
            "0,2",
            "--max-new-tokens",
            "16",
            "--rounds",
            "1",
            "--warmup-tokens",
            "4",
        ]
    else:
        grid = [
            "--batches",
            a.sweep_batches_b if batched else "1",
            "--ks",
            KS,
            "--max-new-tokens",
            str(NEW_B) if batched else "100",
            "--rounds",
            str(a.rounds_b if batched else a.rounds_a),
        ]
    sh(
        [
            sys.executable,
            str(ROOT / "bench/programs/gptfast_sweep.py"),
            "--program",
            str(prog),
            "--flavour",
            "batched" if batched else "upstream",
            "--target",
            str(ck / TARGET / "model.pth"),
            "--draft",
            str(ck / draft / "model.pth"),
            "--prompt",
            PROMPT,
            *grid,
            "--seed",  # each process its own draw of the sampled acceptance (B1-B7 shared one)
            str(SEEDS[part[-1]]),
            "--out",
            str(out / f"{part}.json"),
        ],
        out / f"logs/{part}.log",
    )


def slim(out: Path) -> None:
    """Each capture's trace replaced by its breakdown JSON, gzipped (``breakdown.json.gz``, what
    ``whatif`` reads back the same): raw eager traces at batch 8 and more overflow what a device
    run can send back, and even their breakdowns are 0.2-0.6 MB plain."""
    for manifest in sorted(out.rglob("manifest.json")):
        folder = manifest.parent
        traces = [p for p in folder.iterdir() if p.name.startswith("capture.") and p.is_file()]
        if not traces:
            continue
        cli = [sys.executable, "-m", "verifyprof.cli", "breakdown", str(folder), "--json"]
        with (folder / "breakdown.json").open("w") as fh:
            code = subprocess.run(cli, stdout=fh, timeout=300).returncode
        print(f"slim: {folder.relative_to(out)}: breakdown exit {code}", flush=True)
        if code == 0:
            kept = folder / "breakdown.json"
            (folder / "breakdown.json.gz").write_bytes(gzip.compress(kept.read_bytes(), mtime=0))
            kept.unlink()
            for t in traces:
                t.unlink()


def pack(out: Path, dest: Path, parts: list[str]) -> None:
    """One tar.gz of everything but nsys reports and unzipped SQLite, split in 15 MiB pieces."""
    dest.mkdir(parents=True, exist_ok=True)
    name = dest / f"proof-{'-'.join(parts)}.tar.gz"
    with tarfile.open(name, "w:gz") as tar:
        for path in sorted(out.rglob("*")):
            if path.is_file() and not path.name.endswith((".nsys-rep", ".sqlite", ".qdstrm")):
                tar.add(path, arcname=str(path.relative_to(out.parent)))
    data = name.read_bytes()
    if len(data) > SPLIT:
        name.unlink()
        for i in range(0, len(data), SPLIT):
            Path(f"{name}.{i // SPLIT:02d}").write_bytes(data[i : i + SPLIT])
        print(f"packed {len(data):,} bytes in {-(-len(data) // SPLIT)} pieces: cat {name.name}.*")
    else:
        print(f"packed {name} ({len(data):,} bytes)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="capA,capB,sweepA1,sweepA2,sweepB1,sweepB2")
    ap.add_argument("--ckpt", type=Path, default=Path("/tmp/gptfast-ckpt"))
    ap.add_argument("--legacy", action="store_true", help="capA as two plain captures")
    ap.add_argument("--smoke", action="store_true", help="tiny grids, one k, one batch")
    ap.add_argument("--rounds-a", type=int, default=2, help="sweepA rounds per process")
    ap.add_argument("--rounds-b", type=int, default=1, help="sweepB rounds per process")
    ap.add_argument("--batches-b", default="1,8", help="capB's --batches")
    ap.add_argument(
        "--sweep-batches-b", default=BATCHES, help="sweepB's batches (B7: 1,2,4 in a short lease)"
    )
    ap.add_argument(
        "--baseline-repeat-b", type=int, default=1, help="capB's --baseline-repeat (B2-B5: 1)"
    )
    ap.add_argument(
        "--samples-b", type=int, default=SAMPLES_B, help="capB's samples (prompts), B4-B5: 3"
    )
    ap.add_argument(
        "--slim",
        action="store_true",
        help="pack each capture as its breakdown.json (verifyprof breakdown --json), no traces",
    )
    ap.add_argument("--deadline", type=float, help="seconds: no step runs past it (then packs)")
    ap.add_argument("--pack", type=Path, help="tar the results here at the end ($OUT)")
    ap.add_argument("--target", default=TARGET, help="gpt-fast config of the target (CPU checks)")
    ap.add_argument("--target-dim", type=int, default=TARGET_DIM)
    ap.add_argument("--draft-a", default=DRAFT_A)
    ap.add_argument("--device", help="A's --device (CPU checks); B is CUDA-only")
    ap.add_argument("--backend", default="nsys", help="capture's --backend (none: CPU checks)")
    a = ap.parse_args(argv)
    if a.samples_b < 2:
        ap.error("--samples-b: at least 2 (the first is cold)")
    globals().update(TARGET=a.target, TARGET_DIM=a.target_dim, DRAFT_A=a.draft_a)
    BACKEND[:] = ["--backend", a.backend]
    globals()["SMOKE"] = a.smoke
    DEADLINE[0] = time.perf_counter() + (a.deadline or float("inf"))
    if a.device:
        global DEVICE_A
        DEVICE_A = ["--device", a.device]
    parts = [p for p in a.only.split(",") if p]
    known = {"capA", "capB", "sweepA1", "sweepA2", "sweepB1", "sweepB2"}
    if not parts or set(parts) - known:
        print(f"proof_external: --only takes {', '.join(sorted(known))}")
        return 2
    for prog in (A, B):
        if not (prog / "generate.py").is_file():
            print(
                f"proof_external: {prog}/generate.py missing: bash bench/programs/ext_programs.sh"
            )
            return 2
    a.out, a.ckpt = a.out.resolve(), a.ckpt.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    times = {}
    try:
        make_weights(a.ckpt, set(parts), a.out)
        times["weights"] = time.perf_counter() - t0
        prompts = a.out / "prompts.jsonl"
        prompts.write_text(
            "".join(json.dumps({"prompt": PROMPT}) + "\n" for _ in range(a.samples_b))
        )
        for part in parts:
            t1 = time.perf_counter()
            if part == "capA":
                cap_a(a, a.ckpt, a.out)
            elif part == "capB":
                cap_b(a, a.ckpt, a.out, prompts)
            else:
                sweep(a, a.ckpt, a.out, part)
            times[part] = time.perf_counter() - t1
    finally:
        times["total"] = time.perf_counter() - t0
        (a.out / "times.json").write_text(json.dumps(times, indent=1))
        print("device seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()))
        if a.slim:
            slim(a.out)
        if a.pack:
            pack(a.out, a.pack, parts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
