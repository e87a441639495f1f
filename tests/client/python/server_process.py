"""A real specverify-server for Python tests, tied to the test process.

The binary comes from $SPECVERIFY_SERVER (CTest sets it). The server listens
on 127.0.0.1 port 0 (or the ``listen`` address given) and prints "listening
on port N" (or "listening on unix:PATH"); we read that line.

The server must die with the test, even when the test is SIGKILLed (a CTest
timeout): it is started through a tiny launcher that asks the kernel for
SIGKILL when its parent dies (prctl(PR_SET_PDEATHSIG), kept across execv) and
then execs the server -- the same contract as tests/testing/subprocess.h's
ForkTiedToParent. Not preexec_fn: that runs Python in a child forked from a
process whose gRPC threads may hold locks.
"""

import os
import select
import subprocess
import sys
import tempfile
import time

_LAUNCHER = r"""
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
    os._exit(125)
# The parent died before the prctl: no signal will come.
if os.getppid() != int(sys.argv[1]):
    os._exit(125)
os.execv(sys.argv[2], sys.argv[2:])
"""


def server_binary():
    binary = os.environ.get("SPECVERIFY_SERVER")
    if not binary or not os.access(binary, os.X_OK):
        raise RuntimeError(f"SPECVERIFY_SERVER={binary!r} is not an executable server binary")
    return binary


class ServerProcess:
    """Starts the server with ``flags`` (beyond the listen and metrics
    addresses); ``address`` is "127.0.0.1:port", or the unix: ``listen``
    address. stop() (or the context
    manager) ends it with SIGTERM, and SIGKILL after 10 s."""

    def __init__(self, *flags, startup_timeout=30.0, listen="127.0.0.1:0"):
        self.stderr = tempfile.TemporaryFile()
        args = [server_binary(), f"--listen_address={listen}", "--metrics_address=", *flags]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args],
            stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL)
        where = self._read_listening(startup_timeout)
        if listen.startswith("unix:"):
            self.port = None
            self.address = where
        else:
            self.port = int(where[len("port "):])
            self.address = f"127.0.0.1:{self.port}"

    def _read_listening(self, timeout):
        """What the first "listening on ..." line names: "port N" or the
        unix: address."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        seen = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break  # the server exited
                seen += chunk
                lines = seen.split(b"\n")
                for line in lines[:-1]:  # whole lines only
                    if line.startswith(b"listening on "):
                        return line[len(b"listening on "):].decode()
            elif self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"the server did not start: stdout {seen!r}, stderr {self.log()!r}")

    def log(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
