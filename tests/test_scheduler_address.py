"""``--scheduler ADDRESS`` is checked before dask sees it: a closed port, an HTTP server, a
service that answers something else or hangs up, and an address of the wrong form each fail in
seconds with one line naming the address and the problem, exit code 2; a real Dask scheduler
passes. Real listening sockets, the real CLI."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import forked_cli
import pytest
from conftest import OWN_TRACES

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.pipeline.dask_address import TIMEOUT_S, check_scheduler

RANKS = OWN_TRACES / "torchrun-2ranks-one-gpu"
HANG_S = 60.0  # the CLI ends well before this: it fails in seconds, it does not hang
LONG_S = 60.0  # a check given this long that ends in half of it did not wait for the time-out


def breakdown_on(address: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = forked_cli.run(  # a process forked from one that has imported the CLI
        ["breakdown", str(RANKS), "--scheduler", address], text=True, timeout=120
    )
    return done, time.monotonic() - started


def assert_one_line(done: subprocess.CompletedProcess, address: str, problem: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"verifyprof: error: --scheduler {address}: {problem}"]
    assert done.stdout == ""


@pytest.fixture
def service() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """``service(answer)``: a TCP server on 127.0.0.1 that calls ``answer(conn)`` for each
    connection; returns its tcp:// address."""
    servers: list[socket.socket] = []

    def start(answer: Callable[[socket.socket], None]) -> str:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    answer(conn)

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def http_server() -> Iterator[str]:
    class Quiet(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_closed_port_is_refused_at_once():
    done, took = breakdown_on("tcp://127.0.0.1:1")
    assert_one_line(done, "tcp://127.0.0.1:1", "connection refused: no scheduler listens there")
    assert took < HANG_S


def test_an_http_server_is_not_a_scheduler(http_server):
    done, took = breakdown_on(http_server)
    assert_one_line(
        done,
        http_server,
        f"not a Dask scheduler: connected, but no Dask handshake came within {TIMEOUT_S:g} s"
        " (an HTTP server waits silently)",
    )
    assert took < TIMEOUT_S + HANG_S


@pytest.mark.parametrize(
    "answer",
    [b"\x9c\xfe\x01garbage\x00\xffnot a frame" * 4, b"SSH-2.0-OpenSSH_9.6\r\n"],
    ids=["garbage", "ssh-banner"],
)
def test_a_service_that_answers_something_else_is_not_a_scheduler(service, answer):
    address = service(lambda conn: (conn.sendall(answer), time.sleep(TIMEOUT_S * 2)))
    done, took = breakdown_on(address)
    assert_one_line(
        done,
        address,
        f"not a Dask scheduler: it answered {answer[:24]!r}, not the Dask comm handshake",
    )
    assert took < HANG_S


def checked_in(address: str) -> tuple[str, float]:
    """The check itself, in-process, given ``LONG_S``: its one-line error and how long it took
    (no interpreter start in the time, so waiting for the time-out shows on a loaded machine)."""
    started = time.monotonic()
    with pytest.raises(VerifyprofError) as raised:
        check_scheduler(address, timeout=LONG_S)
    return str(raised.value), time.monotonic() - started


@pytest.mark.parametrize(
    "answer", [b"\x9c\xfe\x01garbage\x00\xffnot a frame" * 4, b"SSH-2.0-x\r\n"]
)
def test_a_wrong_answer_is_refused_without_waiting_for_the_time_out(service, answer):
    address = service(lambda conn: (conn.sendall(answer), time.sleep(LONG_S * 2)))
    message, took = checked_in(address)
    assert "not the Dask comm handshake" in message
    assert took < LONG_S / 2


def test_a_closed_port_is_refused_without_waiting_for_the_time_out():
    message, took = checked_in("tcp://127.0.0.1:1")
    assert message.endswith("connection refused: no scheduler listens there")
    assert took < LONG_S / 2


def test_a_service_that_hangs_up_is_not_a_scheduler(service):
    address = service(lambda conn: None)
    done, _ = breakdown_on(address)
    assert_one_line(done, address, "not a Dask scheduler: it closed the connection without a word")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        (
            "tls://127.0.0.1:8786",
            "tls:// is not supported: give a tcp://HOST:PORT address (or 'dask' for a local"
            " cluster)",
        ),
        ("127.0.0.1:8786", "give the scheduler's address as tcp://HOST:PORT (or 'dask')"),
        ("tcp://127.0.0.1", "not a tcp://HOST:PORT address"),
        ("tcp://127.0.0.1:99999", "not a tcp://HOST:PORT address (Port out of range 0-65535)"),
    ],
)
def test_an_address_of_another_form_is_one_line(address, problem):
    done, _ = breakdown_on(address)
    assert_one_line(done, address, problem)


def test_a_real_dask_scheduler_passes_the_check():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=":0"
    ) as cluster:
        check_scheduler(cluster.scheduler_address)  # raises if it were refused
