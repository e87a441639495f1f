"""The ``specverify-client-id`` header: a client's name for itself on a unix
socket, where gRPC reports every peer as "unix:" and the server would keep one
per-client account (limits, fair batch turns) for every worker on the host.
The server's rule is proto/runtime/client_id.h; docs/SERVER.md, "Per-client
limits and fairness"."""

import itertools
import os
import re
import socket

METADATA_KEY = "specverify-client-id"
MAX_BYTES = 128
_RULE = "must be 1-128 characters of [A-Za-z0-9._:-]"
_OUTSIDE = re.compile(r"[^A-Za-z0-9._:-]")
_names = itertools.count()


def check_client_id(client_id):
    """Raises ValueError unless ``client_id`` is 1-128 characters of
    [A-Za-z0-9._:-] (the message names the header, as the server's does),
    TypeError unless it is a str."""
    if not isinstance(client_id, str):
        raise TypeError(f"client_id must be a str, got {type(client_id).__name__}")
    if not 1 <= len(client_id) <= MAX_BYTES:
        raise ValueError(f"client_id: metadata {METADATA_KEY} has {len(client_id)} characters; {_RULE}")
    bad = _OUTSIDE.search(client_id)
    if bad:
        raise ValueError(f"client_id: metadata {METADATA_KEY} has character code "
                         f"{ord(bad.group())} at offset {bad.start()}; {_RULE}")


def new_client_id():
    """"<host>-<pid>-<n>": a name of its own for each call in this process."""
    host = _OUTSIDE.sub("", socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}-{next(_names)}"


def is_unix_socket_target(address):
    return address.startswith(("unix:", "unix-abstract:"))
