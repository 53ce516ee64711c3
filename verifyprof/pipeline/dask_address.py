"""``--scheduler ADDRESS`` checked before dask sees it, so that a wrong address is one line in
seconds: dask's own client, given a closed port, an HTTP server or a service that answers
garbage, retries for its whole connect timeout or fails deep inside its protocol code.

The checks, in order: the address is ``tcp://HOST:PORT`` (the one form the tool takes: ``tls://``
needs certificates that verifyprof has no options for); a TCP connection opens within
:data:`TIMEOUT_S`; and the peer speaks first, as a Dask scheduler does, with the comm protocol's
handshake (a length-prefixed frame holding the msgpack map ``{compression, python,
pickle-protocol}``) within the same time. An HTTP server (the dashboard's port, say) says nothing
until asked; another service answers something else.
"""

from __future__ import annotations

import socket
import struct
import time
from urllib.parse import urlsplit

from verifyprof.contracts.errors import VerifyprofError

TIMEOUT_S = 3.0
MAX_HANDSHAKE = 1 << 16  # bytes: a scheduler's handshake is under a hundred
HANDSHAKE_KEYS = (b"pickle-protocol", b"compression")


def scheduler_host_port(address: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (``[::1]`` for IPv6), else the one-line error."""
    scheme, sep, _ = address.partition("://")
    if not sep:
        raise _bad(address, "give the scheduler's address as tcp://HOST:PORT (or 'dask')")
    if scheme.lower() != "tcp":
        raise _bad(
            address,
            f"{scheme}:// is not supported: give a tcp://HOST:PORT address (or 'dask' for a"
            " local cluster)",
        )
    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise _bad(address, f"not a tcp://HOST:PORT address ({exc})") from None
    if not host or port is None or parts.path not in ("", "/"):
        raise _bad(address, "not a tcp://HOST:PORT address")
    return host, port


def check_scheduler(address: str, timeout: float = TIMEOUT_S) -> None:
    """Raise the one-line error unless a Dask scheduler answers at ``address`` in ``timeout``."""
    host, port = scheduler_host_port(address)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.gaierror as exc:
        raise _bad(address, f"cannot resolve {host} ({exc.strerror})") from None
    except ConnectionRefusedError:
        raise _bad(address, "connection refused: no scheduler listens there") from None
    except TimeoutError:
        raise _bad(address, f"no answer to a connection within {timeout:g} s") from None
    except OSError as exc:
        raise _bad(address, f"cannot connect ({exc.strerror or exc})") from None
    with sock:
        seen = b""
        while len(seen) < 8:
            seen += _read(sock, 4096, deadline, address, timeout, seen)
        (size,) = struct.unpack("<Q", seen[:8])  # the frames' length (older versions: their count)
        if not 0 < size <= MAX_HANDSHAKE:
            raise _not_dask(address, seen)
        while not any(key in seen for key in HANDSHAKE_KEYS):
            if len(seen) > MAX_HANDSHAKE:
                raise _not_dask(address, seen)
            seen += _read(sock, 4096, deadline, address, timeout, seen)


def _not_dask(address: str, seen: bytes) -> VerifyprofError:
    return _bad(
        address, f"not a Dask scheduler: it answered {seen[:24]!r}, not the Dask comm handshake"
    )


def _read(
    sock: socket.socket, n: int, deadline: float, address: str, timeout: float, seen: bytes = b""
) -> bytes:
    """Up to ``n`` bytes (at least one) before ``deadline``; the one-line error otherwise."""
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data = sock.recv(n)
    except TimeoutError:
        what = f" (it sent {seen[:24]!r})" if seen else " (an HTTP server waits silently)"
        raise _bad(
            address,
            f"not a Dask scheduler: connected, but no Dask handshake came within {timeout:g} s"
            + what,
        ) from None
    except OSError as exc:
        raise _bad(address, f"connection failed ({exc.strerror or exc})") from None
    if not data:
        after = f" after {seen[:24]!r}" if seen else " without a word"
        raise _bad(address, f"not a Dask scheduler: it closed the connection{after}")
    return data


def _bad(address: str, problem: str) -> VerifyprofError:
    return VerifyprofError(f"--scheduler {address}: {problem}")
