"""Several trace files (one per rank, stage or node) broken down in parallel and reduced to one
multi-rank breakdown: the same answer as reading them as one trace, whoever runs the map."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from conftest import REPO, interruptible, public_export
from golden_cases import differences
from test_kineto_reader import A100, B200, MI300X, plain, write_trace

from verifyprof import pipeline
from verifyprof.attribution.breakdown import breakdown as attribute
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.trace import load_trace

sys.path.insert(0, str(REPO / "bench"))
import gen_nsys_export
from split_nsys_ranks import split

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
NSYS_2GPU = public_export("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")


def rank_file(src: Path, dst: Path, rank: int, base_shift_ns: int = 0) -> Path:
    """A real trace rewritten as another rank's process: its rank, clock base and host pid."""
    doc = json.loads(json.dumps(plain(src)))
    if "distributedInfo" in doc:
        doc["distributedInfo"]["rank"] = rank
    doc["baseTimeNanoseconds"] = doc.get("baseTimeNanoseconds", 0) + base_shift_ns
    gpu_tracks = {e.get("pid") for e in doc["traceEvents"] if e.get("cat") in GPU_CATS}
    for e in doc["traceEvents"]:
        if (
            e.get("cat") not in GPU_CATS
            and isinstance(e.get("pid"), int)
            and e["pid"] not in gpu_tracks
        ):
            e["pid"] += 7 * rank  # each rank is its own process
    return write_trace(dst, doc)


def as_json(result) -> dict:
    return json.loads(json.dumps(result.to_json()))


def one_process(source, regex: str | None = None, whole: bool = False) -> dict:
    """Today's path: every file read into one trace in this process, broken down once."""
    return as_json(
        attribute(
            load_trace(source),
            step_regex=regex or "^$",
            taxonomy=load_taxonomy(),
            whole_trace=whole,
        )
    )


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """A process forked from one that has imported the CLI (``forked_cli``): its map forks its
    own workers, as a fresh one does."""
    return forked_cli.run(args, text=True, timeout=240, env=dict(os.environ, COLUMNS="160"))


@pytest.fixture(scope="module")
def a100_ranks(tmp_path_factory) -> Path:
    """Two ranks of the HTA A100 training trace (NCCL allreduce and broadcast), 1 ms apart."""
    folder = tmp_path_factory.mktemp("a100")
    rank_file(A100, folder / "run-TP-0.trace.json.gz", 0)
    rank_file(A100, folder / "run-TP-1.trace.json.gz", 1, base_shift_ns=1_000_000)
    return folder


@pytest.fixture(scope="module")
def a100_one_process(a100_ranks) -> dict:
    """The two A100 ranks broken down in this process, once for the tests that compare with it."""
    return one_process(a100_ranks, "ProfilerStep")


@pytest.mark.parametrize("workers", [1, 2])
def test_kineto_rank_directory_reduces_to_the_one_process_breakdown(
    a100_ranks, a100_one_process, workers
):
    expected = a100_one_process
    got = as_json(
        pipeline.breakdown(
            a100_ranks, step_regex="ProfilerStep", parallel=ParallelOptions(workers=workers)
        )
    )
    assert (
        expected["summary"]["collectives"]["allreduce"]["devices"] == 2
    )  # matched across the two files
    assert differences(expected, got) == []


@pytest.mark.parametrize(("src", "regex", "whole"), [(B200, None, True), (MI300X, "DECODE", False)])
def test_sglang_rank_files_reduce_like_one_trace(tmp_path, src, regex, whole):
    for rank in (
        0,
        1,
    ):  # the MI300X trace has no distributedInfo: ranks come from SGLang's -TP-<r> names
        rank_file(
            src,
            tmp_path / f"1721480000.123-TP-{rank}.trace.json.gz",
            rank,
            base_shift_ns=rank * 2_000_000,
        )
    got = as_json(
        pipeline.breakdown(
            str(tmp_path / "*-TP-*.trace.json.gz"), step_regex=regex, whole_trace=whole
        )
    )
    assert got["trace"]["ranks"] == [0, 1]
    assert differences(one_process(tmp_path, regex, whole), got) == []


@pytest.mark.parametrize("whole", [True, False])
def test_real_two_gpu_nsys_trace_split_per_rank_reduces_to_the_same_breakdown(tmp_path, whole):
    files = split(NSYS_2GPU, tmp_path)
    assert len(files) == 2
    expected = as_json(pipeline.breakdown(NSYS_2GPU, step_regex=".", whole_trace=whole))
    got = as_json(
        pipeline.breakdown(
            [str(f) for f in files],
            step_regex=".",
            whole_trace=whole,
            parallel=ParallelOptions(workers=2),
        )
    )
    assert "sendrecv" in got["summary"]["collectives"]
    assert differences(expected, got) == ["$.trace.path: length 1 -> 2"]


@pytest.fixture(scope="module")
def generated_ranks(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A generated 2-rank speculative-decoding export (graphs, NCCL allreduce) and its per-rank
    split."""
    folder = tmp_path_factory.mktemp("gen")
    whole = folder / "tp2.sqlite"
    gen_nsys_export.generate(whole, kernels=8_000, ranks=2, layers=4, seed=5)
    return whole, split(whole, folder / "ranks")


def test_per_rank_nsys_exports_give_the_multi_rank_breakdown_steps_and_summary(generated_ranks):
    whole, files = generated_ranks
    expected = as_json(pipeline.breakdown(whole))
    got = as_json(
        pipeline.breakdown(str(files[0].parent / "*.sqlite"), parallel=ParallelOptions(workers=2))
    )
    assert {s["rank"] for s in got["steps"]} == {0, 1} and got["steps"][0]["comm"][
        "comm_calls"
    ] >= 0
    assert differences(expected, got) == ["$.trace.path: length 1 -> 2"]


def test_whatif_takes_the_per_rank_files(generated_ranks):
    whole, files = generated_ranks
    single = run_cli("whatif", "--from", str(whole), "--accept-len", "2.5", "--json")
    several = run_cli(
        "whatif", "--from", str(files[0].parent), "--accept-len", "2.5", "--workers", "2", "--json"
    )
    assert single.returncode == several.returncode == 0, several.stderr
    expected, got = json.loads(single.stdout), json.loads(several.stdout)
    assert differences(expected, got) == [
        f"$.current.source: {str(whole)!r} -> {str(files[0])!r}"
    ]  # the first file names it


def test_report_and_compare_take_the_per_rank_files(generated_ranks):
    whole, files = generated_ranks
    folder = files[0].parent
    data = pipeline.report(folder, accept_len=2.5)
    assert set(data.steps["rank"]) == {0, 1} and data.whatif is not None
    assert (
        data.kernels is None and "per-rank nsys files" in data.timeline_note
    )  # no one trace: no timeline
    assert data.steps[["step", "device", "wall_ns"]].equals(
        pipeline.breakdown(whole).steps[["step", "device", "wall_ns"]]
    )
    same = pipeline.compare(folder, whole)
    assert (
        same.to_json()["comparable"]
        and same.to_json()["verify"]["after_ms"] == same.to_json()["verify"]["before_ms"]
    )


def test_a_directory_of_rank_files_in_mixed_forms_reads_every_rank(generated_ranks, tmp_path):
    import gzip

    whole, (rank0, rank1) = generated_ranks
    (tmp_path / "run-rank0.sqlite").write_bytes(rank0.read_bytes())
    (tmp_path / "run-rank1.sqlite.gz").write_bytes(
        gzip.compress(rank1.read_bytes())
    )  # every rank kept, whatever its form
    (tmp_path / "run-rank0.sqlite.gz").write_bytes(
        gzip.compress(rank0.read_bytes())
    )  # rank 0 again, in a second form
    got = pipeline.breakdown(tmp_path, parallel=ParallelOptions(workers=1))
    assert got.trace.source == [
        str(tmp_path / "run-rank0.sqlite"),
        str(tmp_path / "run-rank1.sqlite.gz"),
    ]
    assert got.steps[["step", "device", "wall_ns"]].equals(
        pipeline.breakdown(whole).steps[["step", "device", "wall_ns"]]
    )


def test_one_nsys_file_given_twice_is_refused_not_merged_as_two_ranks(generated_ranks, tmp_path):
    rank0 = generated_ranks[1][0]
    copies = [tmp_path / "trace-rank0.sqlite", tmp_path / "trace-rank1.sqlite"]
    for copy in copies:
        copy.write_bytes(rank0.read_bytes())
    done = run_cli("breakdown", str(tmp_path))
    assert (
        done.returncode == 2 and f"{copies[1]}: is the same capture as {copies[0]}" in done.stderr
    )
    assert "one file given twice" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_command_that_needs_one_trace_says_which_commands_take_per_rank_nsys_files(
    generated_ranks,
):
    done = run_cli("kernels", str(generated_ranks[1][0].parent))
    assert (
        done.returncode == 2
        and "breakdown, whatif, report and compare map them rank by rank" in done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_stage_files_match_collectives_only_within_their_stage(tmp_path):
    for stage, shift in (("EXTEND", 0), ("DECODE", 10**10)):
        for rank in (0, 1):
            rank_file(
                B200,
                tmp_path / f"p-TP-{rank}-{stage}.trace.json.gz",
                rank,
                base_shift_ns=shift + rank * 1_000,
            )
    got = as_json(pipeline.breakdown(tmp_path, whole_trace=True))
    one_stage = as_json(
        pipeline.breakdown(str(tmp_path / "*-EXTEND.trace.json.gz"), whole_trace=True)
    )
    calls = {f: c["calls"] for f, c in got["summary"]["collectives"].items()}
    assert calls == {f: 2 * c["calls"] for f, c in one_stage["summary"]["collectives"].items()}
    assert [d["device"] for d in got["trace"]["devices"]] == [
        0,
        1,
    ]  # a rank's stage files share its GPU
    assert len(got["steps"]) == 4


def test_a_corrupt_file_is_one_warning_and_the_others_result_stays(
    a100_ranks, a100_one_process, tmp_path
):
    for f in a100_ranks.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "run-TP-2.trace.json.gz").write_bytes(
        (a100_ranks / "run-TP-1.trace.json.gz").read_bytes()[:200_000]
    )
    done = run_cli(
        "breakdown", str(tmp_path), "--range", "ProfilerStep", "--workers", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    warnings = [  # the HTA trace's own integrity warning (shared correlation ids) is another
        line
        for line in done.stderr.splitlines()
        if line.startswith("verifyprof: warning:") and "run-TP-2" in line
    ]
    assert len(warnings) == 1 and "truncated gzip" in warnings[0]
    got = json.loads(done.stdout)
    assert any("skipped run-TP-2.trace.json.gz" in w for w in got["trace"]["warnings"])
    assert got["steps"] == a100_one_process["steps"]


def test_strict_makes_a_failed_file_exit_2_naming_it(a100_ranks, tmp_path):
    (tmp_path / "good-TP-0.trace.json.gz").write_bytes(
        (a100_ranks / "run-TP-0.trace.json.gz").read_bytes()
    )
    (tmp_path / "bad-TP-1.trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    done = run_cli("breakdown", str(tmp_path), "--range", "ProfilerStep", "--strict")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "bad-TP-1.trace.json.gz" in done.stderr.strip().splitlines()[-1]


KILL_A_WORKER = r"""
import json, os, signal, sys, threading
import psutil
from pathlib import Path
from verifyprof.pipeline.local_map import map_local
from verifyprof.pipeline.parallel import Failure, MapOptions

files = [Path(p) for p in sys.argv[1:]]
killed = []

def kill_first_worker():  # a worker's process dies mid-file (as under the OOM killer)
    me = psutil.Process()
    while not killed:
        try:
            children = me.children()
            servers = [c for c in children if "forkserver" in " ".join(c.cmdline())]
            workers = [w for s in servers for w in s.children()]
            workers += [c for c in children if c not in servers and c.cmdline() == me.cmdline()]
        except psutil.Error:
            continue
        if workers:
            os.kill(workers[0].pid, signal.SIGKILL)
            killed.append(workers[0].pid)

for attempt in range(10):  # the kill races the worker's end: retry until it lands mid-file
    killed.clear()
    watcher = threading.Thread(target=kill_first_worker, daemon=True)
    watcher.start()
    outcomes = dict(
        map_local(
            [(i, f, None) for i, f in enumerate(files)],
            MapOptions(step_regex="ProfilerStep"),
            workers=2,
        )
    )
    killed.append(-1)
    watcher.join(timeout=5)
    failures = [o.reason for o in outcomes.values() if isinstance(o, Failure)]
    if failures:
        break
print(json.dumps({"outcomes": len(outcomes), "failures": failures, "attempts": attempt + 1}))
"""


def test_a_killed_worker_costs_only_its_file(a100_ranks):
    """Run where the CLI runs it: a fresh interpreter (the test process's own threads and fork
    servers would change how workers start)."""
    files = [str(f) for f in sorted(a100_ranks.iterdir())] + [str(A100)]
    done = subprocess.run(
        [sys.executable, "-c", KILL_A_WORKER, *files], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (
        result["outcomes"] == 3 and len(result["failures"]) == 1
    )  # the killed file is lost, only it
    assert (
        "worker process died (killed by signal 9)" in result["failures"][0]
        or "could not start" in result["failures"][0]
    )


def test_nsys_files_of_separate_runs_are_refused_not_merged_as_ranks():
    """Five single-GPU runs made one after another are not a five-rank run."""
    done = run_cli(
        "breakdown",
        str(REPO / "traces" / "workload-dense-eager" / "trace.sqlite.gz"),
        str(REPO / "traces" / "workload-dense-graph" / "trace.sqlite.gz"),
    )
    assert (
        done.returncode == 2
        and "ran at different times" in done.stderr
        and "Traceback" not in done.stderr
    )


def test_a_map_stopped_after_its_first_file_leaves_no_worker_behind(a100_ranks):
    """strict stops the map at the first failure (``close()`` on its iterator): every worker it
    started, the one that just answered included, is stopped and reaped."""
    import psutil

    from verifyprof.pipeline.local_map import map_local
    from verifyprof.pipeline.parallel import MapOptions

    def live() -> set[
        int
    ]:  # this process's descendants, fork servers aside (other tests may have left some)
        return {
            c.pid
            for c in psutil.Process().children(recursive=True)
            if c.status() != psutil.STATUS_ZOMBIE and "forkserver" not in " ".join(c.cmdline())
        }

    before = live()
    files = sorted(a100_ranks.iterdir())
    outcomes = map_local(
        [(i, f, None) for i, f in enumerate(files)],
        MapOptions(step_regex="ProfilerStep"),
        workers=2,
    )
    next(outcomes)
    started = live() - before
    outcomes.close()
    assert started and not (live() & started)  # workers ran, and none of them is left


def test_two_nodes_reports_with_the_same_pids_and_device_ids_are_four_ranks_on_four_devices(
    generated_ranks, tmp_path
):
    """One nsys report per node: each node's processes drive its GPUs 0 and 1, and (containers)
    may have the same pids. The second node's devices come after the first's, every process is
    its own rank, and each node keeps its own steps."""
    import sqlite3

    whole, _ = generated_ranks
    node_a, node_b = tmp_path / "node-a.sqlite", tmp_path / "node-b.sqlite"
    node_a.write_bytes(whole.read_bytes())
    node_b.write_bytes(whole.read_bytes())
    con = sqlite3.connect(node_b)  # the second node's nsys started 1.5 ms later, on GPUs of its own
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + 1500000")
    con.execute("UPDATE TARGET_INFO_GPU SET uuid = 'GPU-node-b-' || id")
    con.commit()
    con.close()
    one = as_json(pipeline.breakdown(whole))
    two = as_json(
        pipeline.breakdown([str(node_a), str(node_b)], parallel=ParallelOptions(workers=2))
    )
    assert [d["device"] for d in two["trace"]["devices"]] == [0, 1, 2, 3] and two["trace"][
        "ranks"
    ] == [0, 1, 2, 3]
    assert not [
        w for w in two["trace"]["warnings"] if "ran on one GPU" in w
    ]  # other GPUs: no sharing to warn of
    assert len(two["steps"]) == 2 * len(one["steps"])
    by_device = {d: sum(s["device"] == d for s in two["steps"]) for d in range(4)}
    assert by_device[2] == by_device[0] and by_device[3] == by_device[1] and by_device[0] > 0
    assert {(s["device"], s["rank"]) for s in two["steps"] if s["device"] >= 0} == {
        (d, d) for d in range(4)
    }
    allreduce = two["summary"]["collectives"][
        "allreduce"
    ]  # each call one call over both nodes, 1.5 ms apart
    assert (
        allreduce["devices"] == 4
        and allreduce["calls"] == one["summary"]["collectives"]["allreduce"]["calls"]
    )
    assert (
        1_400_000
        < allreduce["spread_ns_p50"] - one["summary"]["collectives"]["allreduce"]["spread_ns_p50"]
        < 1_600_000
    )


def test_a_terminal_sees_how_many_rank_files_are_mapped(generated_ranks):
    from test_progress import run_on_a_terminal

    _, files = generated_ranks
    seen = run_on_a_terminal("breakdown", *map(str, files), "--workers", "2", "--json")
    assert "(1/2 files)" in seen and "(2/2 files)" in seen


def test_on_an_80_column_terminal_the_status_text_is_cut_never_the_count_or_the_clock(
    generated_ranks, tmp_path
):
    import re

    from test_progress import run_on_a_terminal

    _, files = generated_ranks
    deep = tmp_path / "kimi-k2.5-tp8-eagle3-accept2-pcie-node-0-of-2" / "verify-profile-2026-12-01"
    deep.mkdir(parents=True)
    names = []
    for f in files:
        (deep / f.name).write_bytes(f.read_bytes())
        names.append(str(deep / f.name))
    seen = run_on_a_terminal("breakdown", *names, "--workers", "2", "--json", columns=80)
    drawn = [
        re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", part).rstrip() for part in re.split(r"[\r\n]", seen)
    ]
    lines = [line for line in drawn if "(2/2 files)" in line]
    assert lines and all(len(line) <= 80 for line in drawn)
    assert "…" in lines[-1] and re.search(r"\(2/2 files\) \d+:\d\d:\d\d$", lines[-1])


def interrupt_once_mapping(files: list[Path]) -> tuple[int, str, list[int]]:
    """The CLI on a terminal, Ctrl-C (SIGINT to its process group) once two workers map:
    (exit code, what the terminal showed, the workers' pids)."""
    import pty
    import select
    import signal

    import psutil

    master, slave = pty.openpty()
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verifyprof.cli",
            "breakdown",
            *map(str, files),
            "--range",
            "ProfilerStep",
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "100"},
        preexec_fn=interruptible,
    )
    os.close(slave)
    me, workers, seen = psutil.Process(cli.pid), [], b""
    while cli.poll() is None and len(workers) < 2:
        try:
            workers = [c.pid for c in me.children() if c.cmdline() == me.cmdline()]
        except psutil.Error:
            pass
        if select.select([master], [], [], 0.005)[0]:
            seen += os.read(master, 65536)
    if cli.poll() is None:
        os.killpg(cli.pid, signal.SIGINT)
    while select.select([master], [], [], 60)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return cli.wait(timeout=60), seen.decode(errors="replace"), workers


def test_ctrl_c_while_workers_map_is_one_line_exit_130_and_no_worker_left(a100_ranks, tmp_path):
    import psutil

    files = []
    for n in range(6):  # enough files that the interrupt lands while they map
        files.append(tmp_path / f"run{n}-TP-{n % 2}.trace.json.gz")
        files[-1].write_bytes((a100_ranks / f"run-TP-{n % 2}.trace.json.gz").read_bytes())
    for _ in range(5):
        code, seen, workers = interrupt_once_mapping(files)
        if workers:
            break
    assert code == 130 and seen.rstrip().endswith("verifyprof: interrupted")
    assert "Traceback" not in seen and "KeyboardInterrupt" not in seen
    assert not [
        p
        for p in workers
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


INTERRUPTER = """
import os, psutil, signal, sys
me, hit = psutil.Process(int(sys.argv[1])), set()
while len(hit) < 2:  # SIGINT to each forked worker alone, the moment it exists
    try:
        workers = [c for c in me.children() if c.pid != os.getpid() and c.cmdline() == me.cmdline()]
    except psutil.Error:
        continue
    for w in workers:
        if w.pid not in hit:
            os.kill(w.pid, signal.SIGINT)
            hit.add(w.pid)
print(len(hit))
"""

INTERRUPT_WORKERS = r"""
import json, os, subprocess, sys
from verifyprof.pipeline.local_map import map_local
from verifyprof.pipeline.parallel import Failure, MapOptions

files, interrupter = sys.argv[2:], sys.argv[1]
watcher = subprocess.Popen(
    [sys.executable, "-c", interrupter, str(os.getpid())], stdout=subprocess.PIPE, text=True
)
outcomes = dict(
    map_local(
        [(i, f, None) for i, f in enumerate(files)],
        MapOptions(step_regex="ProfilerStep"),
        workers=2,
    )
)
watcher.kill()
hit = watcher.communicate()[0].strip()
failures = [o.reason for o in outcomes.values() if isinstance(o, Failure)]
print(json.dumps({"interrupted": int(hit or 0), "failures": failures, "mapped": len(outcomes)}))
"""


def test_a_worker_ignores_ctrl_c_and_leaves_it_to_the_cli_that_stops_it(a100_ranks):
    """Ctrl-C reaches every process of the terminal's group: a worker goes on (no traceback of
    its own over the status line), even one interrupted as it starts; the CLI, interrupted, stops
    the workers."""
    files = [str(f) for f in sorted(a100_ranks.iterdir())] * 3
    for _ in range(5):  # the interrupter races the map's end: retry until it reached both workers
        done = subprocess.run(
            [sys.executable, "-c", INTERRUPT_WORKERS, INTERRUPTER, *files],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["interrupted"] == 2:
            break
    assert result["interrupted"] == 2 and result["failures"] == [] and result["mapped"] == 6
    assert "KeyboardInterrupt" not in done.stderr
