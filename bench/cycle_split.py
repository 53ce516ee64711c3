"""Program B's rate errors split into acceptance and cycle time (a diagnosis, not a prediction):
bench/README.md's B6 section.

    python bench/cycle_split.py              # B5 and B6
    python bench/cycle_split.py --only B6

For each proof of ``bench_external.py`` (the model's prediction of every (batch, k) from the
kept captures, as ``bench_external`` makes it) against its sweeps' own runs (``rows``: seconds,
verify cycles and accepted drafts of each ``generate`` call):

* acceptance: predicted accept length / the sweeps' (mean accepted drafts + 1) - 1, per k;
* cycle: predicted (accept length / rate) / the sweeps' (accepted + 1) / rate - 1, per k, and
  the median |cycle error|;
* each run's seconds per verify cycle (prefill inside), median over the processes, beside the
  predicted cycle, per batch and k;
* the standard error of each capture's anchor: 1.2533 x 1.4826 x MAD / median / sqrt(n) of its
  unprofiled per-sample rates (``dilation.samples.unprofiled``).
"""

from __future__ import annotations

import argparse
import json
import statistics as st
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_external  # noqa: E402

from verifyprof.contracts.manifest_dilation import median_error  # noqa: E402


def sweep_runs(proof) -> dict[tuple[int, int], list[dict]]:
    runs: dict[tuple[int, int], list[dict]] = {}
    for path in proof.sweeps:
        for row in json.loads(path.read_text())["rows"]:
            if row["k"] and row["verifies"]:
                runs.setdefault((row["batch"], row["k"]), []).append(row)
    return runs


def split(key: str) -> None:
    proof = bench_external.PROOFS[key]
    rows = bench_external.predict(proof)["rows"]
    runs = sweep_runs(proof)
    print(f"## {key}")
    cycle_errors, by_k = [], {k: ([], []) for k in range(1, 7)}
    table = []
    for (context, batch, k), pt in sorted(rows.items()):
        if (batch, k) not in runs or context != proof.sweep_context:
            continue
        mine = runs[(batch, k)]
        accept = st.mean(r["mean_accepted"] + 1 for r in mine)
        rate = st.mean(r["tok_s_per_request"] for r in mine)
        predicted_cycle = pt["accept_len"] / pt["tokens_per_s"]
        cycle_err = predicted_cycle / (accept / rate) - 1
        cycle_errors.append(cycle_err)
        by_k[k][0].append(pt["accept_len"] / accept - 1)
        by_k[k][1].append(cycle_err)
        per_cycle = st.median(1000 * r["seconds"] / (r["verifies"] / batch) for r in mine)
        table.append((batch, k, per_cycle, 1000 * predicted_cycle))
    for k, (acc, cyc) in by_k.items():
        if acc:
            print(
                f"k={k}: acceptance error median {100 * st.median(acc):+.1f}%,"
                f" cycle error median {100 * st.median(cyc):+.1f}%"
            )
    print(f"median |cycle error| {100 * st.median(abs(e) for e in cycle_errors):.1f}%")
    print("ms per verify cycle, measured (seconds / cycles, prefill inside) / predicted:")
    for batch in sorted({b for b, *_ in table}):
        cells = [f"k{k} {m:5.0f}/{p:5.0f}" for b, k, m, p in table if b == batch]
        print(f"  batch {batch:3d}: " + "  ".join(cells))
    for capture in sorted(proof.folder.iterdir()):
        manifest = json.loads((capture / "manifest.json").read_text())
        samples = ((manifest.get("dilation") or {}).get("samples") or {}).get("unprofiled")
        if samples:
            print(
                f"{capture.name}: unprofiled samples {', '.join(f'{v:,.1f}' for v in samples)}"
                f" tok/s; the median's standard error {100 * median_error(samples):.1f}%"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="B5,B6", help="which proofs of bench_external (B4-B8)")
    for key in ap.parse_args().only.split(","):
        split(key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
