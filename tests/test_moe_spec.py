"""Issue 42's MoE proof program (bench/programs/moe_spec.py) at a tiny size on the CPU: its routed
experts as one grouped GEMM compute what each token's own experts would, its routing touches fewer
experts than independent routing, and a sweep reports every (sequences, k) it was asked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "_grouped_mm"):
    pytest.skip("torch._grouped_mm needs torch 2.8 or later", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench/programs"))

import moe_spec  # noqa: E402
from moe_spec_models import Net  # noqa: E402

TINY = ["--preset", "tiny", "--device", "cpu", "--prompt-len", "16"]


@pytest.fixture(autouse=True)
def one_thread():
    """The program's CPU mode runs one intra-op thread; the test process gets its own back."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_grouped_gemm_equals_each_tokens_own_experts():
    args = moe_spec.parse_args(TINY)
    torch.manual_seed(0)
    net = Net(args.target_cfg, True, "cpu", torch.float32)
    x, topic = torch.randn(7, 128), torch.randn(7, 32)
    with torch.no_grad():
        got = net.experts(0, x, topic, None)
        logits = torch.nn.functional.linear(x, net.router[0]) + net.pop[0] + topic
        weight, idx = logits.softmax(-1).topk(4, -1)
        weight = weight / weight.sum(-1, keepdim=True)
        want = torch.zeros_like(x)
        for t in range(7):
            for j in range(4):
                e = idx[t, j]
                gate, up = (net.w13[0][e] @ x[t]).chunk(2)
                silu = torch.nn.functional.silu(gate)
                want[t] += weight[t, j] * (net.w2[0][e] @ (silu * up))
    assert torch.allclose(got, want, atol=1e-5)


def test_a_sweep_reports_every_configuration_and_correlated_routing(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYPROF_CAPTURE_DIR", str(tmp_path))
    out = tmp_path / "sweep.json"
    argv = TINY + ["--num-seqs", "1,2", "--draft-len", "0,2", "--cycles", "2"]
    assert moe_spec.main(argv + ["--warmup-cycles", "1", "--rounds", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(r["batch"], r["num_draft"]) for r in doc["runs"]] == [(1, 0), (1, 2), (2, 0), (2, 2)]
    assert all(len(r["round_tokens_per_s"]) == 2 for r in doc["runs"])
    assert doc["num_draft"] == 2 and doc["batch"] == 2 and doc["context"] == 16
    assert json.loads((tmp_path / "results.json").read_text()) == doc
    five = doc["routing"]["1"]["5"]  # one sequence's 5 tokens: top-4 of 32 experts
    assert five["distinct"] < 0.85 * five["independent"]
