"""A rolling restart of two real servers under load loses no Verify call
made through the Python client's default channel: round_robin over both
(``options=[("grpc.lb_policy_name", "round_robin")]``, as docs/DEPLOY.md
says), health-checked, Verify resent on UNAVAILABLE and CANCELLED
(``default_service_config``). Each server is drained with SIGTERM while
four threads keep calling; the first is replaced on its own port before the
second goes. Every answer is checked against the oracle. The C++ client's
twin: tests/server/rpc/rolling_restart_test.cc."""

import shutil
import socket
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc
import numpy as np

import oracles
import specverify
from server_process import ServerProcess

# Reconnections and the servers' starts on a loaded 2-core CI machine.
PATIENCE_S = 30.0
SERVER_FLAGS = ("--device=cpu", "--kv_arena_bytes=4194304", "--max_queue_delay_us=200")


class RollingRestartTest(unittest.TestCase):
    def setUp(self):
        self.stop_calls = threading.Event()
        self.lock = threading.Lock()
        self.answered = 0
        self.failures = []
        self.callers = []
        self.servers = []

    def tearDown(self):
        self.stop_calls.set()
        for t in self.callers:
            t.join()
        for s in self.servers:
            s.stop()

    def start_server(self, *flags):
        """A server whose /metrics is at ``server.metrics_url``."""
        with socket.socket() as probe:  # a free port for the metrics endpoint
            probe.bind(("127.0.0.1", 0))
            metrics_port = probe.getsockname()[1]
        server = ServerProcess(*SERVER_FLAGS, f"--metrics_address=127.0.0.1:{metrics_port}", *flags)
        server.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.servers.append(server)
        return server

    @staticmethod
    def verified_sequences(server):
        """specverify_sequences_verified_total of ``server`` (all labels)."""
        text = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("specverify_sequences_verified_total"))

    def eventually(self, condition):
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.02)
        return False

    def call_until_stopped(self, target, seed):
        verifier = specverify.Verifier(target, timeout=20,
                                       options=[("grpc.lb_policy_name", "round_robin")])
        rng = np.random.default_rng(seed)
        try:
            while not self.stop_calls.is_set():
                sequences = [oracles.greedy_sequence(rng, gamma=int(rng.integers(1, 9)), vocab=1000,
                                                     row_bytes=16) for _ in range(2)]
                try:
                    result = verifier.verify_greedy(
                        [s.draft for s in sequences], [s.target for s in sequences],
                        draft_kv=[s.kv for s in sequences], vocab_size=1000, kv_return="inline")
                    for i, s in enumerate(sequences):
                        if (result[i].accepted_length != s.accepted or result[i].next_token != s.next_token
                                or not np.array_equal(result.sequence_kv_rows(i), s.kv[:s.accepted])):
                            raise AssertionError(f"sequence {i}: accepted {result[i].accepted_length} next "
                                                 f"{result[i].next_token}, want {s.accepted} {s.next_token}")
                except Exception as e:  # every failure is the test's finding
                    with self.lock:
                        self.failures.append(repr(e))
                    continue
                with self.lock:
                    self.answered += 1
        finally:
            verifier.close()

    def answered_another(self, more):
        with self.lock:
            target = self.answered + more
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            with self.lock:
                if self.answered >= target:
                    return True
            time.sleep(0.01)
        return False

    def test_replacing_both_servers_under_load_loses_no_call(self):
        a = self.start_server()
        b = self.start_server()
        target = f"ipv4:127.0.0.1:{a.port},127.0.0.1:{b.port}"
        for seed in range(4):
            t = threading.Thread(target=self.call_until_stopped, args=(target, 9000 + seed))
            t.start()
            self.callers.append(t)
        # Both servers take calls before the first one goes.
        self.assertTrue(self.eventually(lambda: self.verified_sequences(a) >= 100
                                        and self.verified_sequences(b) >= 100),
                        "the calls did not reach both servers")

        # A: drained under load (SIGTERM), then replaced on its own port; the
        # rollout waits for answers again, as a readiness gate would.
        self.assertEqual(a.stop(), 0, a.log())
        self.assertTrue(self.answered_another(100), "calls stopped after A drained")
        a2 = self.start_server(f"--listen_address=127.0.0.1:{a.port}")
        self.assertEqual(a2.port, a.port)
        # gRPC reconnects to the replaced port on its own backoff (1 s, then
        # 1.6x); B goes only once A's replacement answers calls, as a
        # rollout waits for the new replica's readiness.
        self.assertTrue(self.eventually(lambda: self.verified_sequences(a2) >= 100),
                        "A's replacement took no calls")

        # B: drained under load; only A's replacement is left to answer.
        self.assertEqual(b.stop(), 0, b.log())
        self.assertTrue(self.answered_another(200), "A's replacement took no calls after B drained")

        self.stop_calls.set()
        for t in self.callers:
            t.join()
        self.callers = []
        with self.lock:
            self.assertEqual(self.failures, [], f"{len(self.failures)} of {self.answered + len(self.failures)} "
                                                "calls failed")


class StreamResendTest(unittest.TestCase):
    """A VerifyStream through a restart of its only server: drained with
    SIGTERM while requests keep coming, then a new server on the same
    socket path after a gap. With ``resend_unanswered`` every request, sent
    before, during or after the gap, is answered and right (the stream
    reopened, what it had not answered sent again); without, the requests
    the draining server never read fail UNAVAILABLE and those of the gap
    cannot be sent: what the option is for."""

    def setUp(self):
        directory = tempfile.mkdtemp(prefix="specverify-stream-")
        self.addCleanup(shutil.rmtree, directory, True)
        self.address = f"unix:{directory}/verifier.sock"

    def restart_under_a_stream(self, resend_unanswered):
        """(future or send error, sequences) per request, and the stream."""
        servers = [ServerProcess(*SERVER_FLAGS, listen=self.address)]
        self.addCleanup(lambda: [server.stop() for server in servers])
        verifier = specverify.Verifier(self.address, timeout=PATIENCE_S)
        self.addCleanup(verifier.close)
        stream = verifier.stream(timeout=120, resend_unanswered=resend_unanswered)
        rng = np.random.default_rng(11)
        sent = []

        def send(count):
            for _ in range(count):
                sequences = [oracles.greedy_sequence(rng, gamma=int(rng.integers(1, 9)), vocab=1000,
                                                     row_bytes=16) for _ in range(2)]
                request = verifier.greedy_request(
                    [s.draft for s in sequences], [s.target for s in sequences],
                    draft_kv=[s.kv for s in sequences], vocab_size=1000, kv_return="inline")
                try:
                    sent.append((stream.send(request), sequences))
                except specverify.VerifierError as e:
                    sent.append((e, sequences))
                time.sleep(0.002)

        send(50)
        drain = threading.Thread(target=servers[0].stop)
        drain.start()
        send(100)  # while it drains
        drain.join()
        self.assertEqual(servers[0].process.returncode, 0, servers[0].log())
        send(20)  # no server at all
        servers.append(ServerProcess(*SERVER_FLAGS, listen=self.address))
        send(50)
        try:
            stream.close(timeout=PATIENCE_S)
        except specverify.VerifierError:
            pass  # without resending: the stream's UNAVAILABLE, counted below
        return sent, stream

    def test_resending_answers_every_request_through_a_restart(self):
        sent, stream = self.restart_under_a_stream(resend_unanswered=4)
        for n, (future, sequences) in enumerate(sent):
            self.assertNotIsInstance(future, Exception, f"request {n} could not be sent: {future}")
            result = future.result(timeout=PATIENCE_S)
            for i, s in enumerate(sequences):
                self.assertEqual((result[i].accepted_length, result[i].next_token),
                                 (s.accepted, s.next_token), f"request {n}, sequence {i}")
                np.testing.assert_array_equal(result.sequence_kv_rows(i), s.kv[:s.accepted])
        self.assertGreaterEqual(stream.reopened, 1)
        self.assertGreater(stream.resent, 0)

    def test_without_resending_the_restart_loses_requests(self):
        sent, stream = self.restart_under_a_stream(resend_unanswered=0)
        failed = 0
        for future, _ in sent:
            if isinstance(future, Exception):
                failed += 1
                continue
            try:
                future.result(timeout=PATIENCE_S)
            except specverify.VerifierError as e:
                self.assertIn(e.code, (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION))
                failed += 1
        self.assertGreater(failed, 0)
        self.assertEqual(stream.reopened, 0)


if __name__ == "__main__":
    unittest.main()
