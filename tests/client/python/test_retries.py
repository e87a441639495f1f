"""The Python client's Verify retry policy (``verify_max_attempts``,
``default_service_config``) against a scripted Verifier service in this
process: each attempt gets the next status of the script, so which refusals
are resent, how often, and which are not, is checked exactly; and
``wait_for_ready``, against a server that comes up while a call waits (the
C++ client's twin: tests/client/verifier_client_retry_test.cc)."""

import json
import shutil
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

import specverify
from specverify import pb
from specverify.v1 import verifier_pb2_grpc as pb_grpc


class ScriptedVerifier(pb_grpc.VerifierServicer):
    """Answers Verify attempt n with script[n] (OK once the script is spent)."""

    def __init__(self, script):
        self.script = list(script)
        self.request_bytes = []
        self.lock = threading.Lock()

    def Verify(self, request, context):
        with self.lock:
            attempt = len(self.request_bytes)
            self.request_bytes.append(request.ByteSize())
        if attempt < len(self.script) and self.script[attempt] != grpc.StatusCode.OK:
            context.abort(self.script[attempt], "scripted refusal")
        return pb.VerifyResponse(request_id=request.request_id)


class RetryTest(unittest.TestCase):
    def serve(self, script):
        self.service = ScriptedVerifier(script)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                  options=[("grpc.max_receive_message_length", 64 << 20)])
        pb_grpc.add_VerifierServicer_to_server(self.service, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addCleanup(self.server.stop, None)
        return f"127.0.0.1:{port}"

    def verify(self, address, attempts, payload_bytes=0):
        """Verify of a request whose size is all the script looks at."""
        verifier = specverify.Verifier(address, timeout=20, verify_max_attempts=attempts)
        self.addCleanup(verifier.close)
        request = pb.VerifyRequest(request_id="r1")
        if payload_bytes:
            request.sequences.add().draft_kv.data = b"x" * payload_bytes
        return verifier.verify(request)

    def test_refusals_before_execution_are_resent_until_answered(self):
        address = self.serve([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                              grpc.StatusCode.UNAVAILABLE])
        self.assertEqual(self.verify(address, attempts=4).request_id, "r1")
        self.assertEqual(len(self.service.request_bytes), 4)

    def test_attempts_stop_at_the_limit_with_the_last_refusal(self):
        address = self.serve([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED])
        with self.assertRaises(specverify.VerifierError) as e:
            self.verify(address, attempts=2)
        self.assertEqual(e.exception.code, grpc.StatusCode.CANCELLED)
        self.assertEqual(len(self.service.request_bytes), 2)

    def test_one_attempt_turns_retries_off(self):
        address = self.serve([grpc.StatusCode.UNAVAILABLE])
        with self.assertRaises(specverify.VerifierError) as e:
            self.verify(address, attempts=1)
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(len(self.service.request_bytes), 1)

    def test_answers_from_execution_are_never_resent(self):
        for code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                     grpc.StatusCode.INTERNAL):
            with self.subTest(code=code):
                address = self.serve([code])
                with self.assertRaises(specverify.VerifierError) as e:
                    self.verify(address, attempts=4)
                self.assertEqual(e.exception.code, code)
                self.assertEqual(len(self.service.request_bytes), 1)

    def test_requests_larger_than_grpcs_default_retry_buffer_are_resent(self):
        # gRPC commits a call whose request exceeds 256 KiB to its first
        # attempt unless the channel raises the per-call retry buffer.
        address = self.serve([grpc.StatusCode.UNAVAILABLE])
        self.verify(address, attempts=2, payload_bytes=4 << 20)
        self.assertEqual(len(self.service.request_bytes), 2)
        self.assertGreater(self.service.request_bytes[1], 4 << 20)

    def test_attempts_outside_grpcs_range_are_refused_by_name(self):
        for attempts in (0, 6):
            with self.assertRaisesRegex(ValueError, "verify_max_attempts"):
                specverify.Verifier("127.0.0.1:1", verify_max_attempts=attempts)

    def test_service_config_matches_the_cpp_clients(self):
        config = json.loads(specverify.default_service_config(4))
        policy = config["methodConfig"][0]["retryPolicy"]
        self.assertEqual(policy["retryableStatusCodes"], ["UNAVAILABLE", "CANCELLED"])
        self.assertEqual(policy["maxAttempts"], 4)
        self.assertNotIn("healthCheckConfig", config)
        config = json.loads(specverify.default_service_config(1, "round_robin"))
        self.assertNotIn("retryPolicy", config["methodConfig"][0])
        self.assertEqual(config["healthCheckConfig"], {"serviceName": "specverify.v1.Verifier"})
        self.assertFalse(any("waitForReady" in m for m in config["methodConfig"]))
        config = json.loads(specverify.default_service_config(4, wait_for_ready=True))
        self.assertEqual(config["methodConfig"][0], {"name": [{"service": "specverify.v1.Verifier"}],
                                                     "waitForReady": True})
        verify = config["methodConfig"][1]
        self.assertEqual(verify["name"], [{"service": "specverify.v1.Verifier", "method": "Verify"}])
        self.assertTrue(verify["waitForReady"])
        self.assertEqual(verify["retryPolicy"]["maxAttempts"], 4)

    def test_wait_for_ready_waits_for_the_server_to_come_up(self):
        """A worker beside a single server that restarts: with
        wait_for_ready the call waits (within its timeout) for the server to
        come up and gets its answer; without, it fails UNAVAILABLE at once."""
        # A socket path nothing listens on yet, in a directory of its own: a
        # released TCP port could be taken by another test's server in the
        # two seconds before this one binds it.
        directory = tempfile.mkdtemp(prefix="specverify-retry-")
        self.addCleanup(shutil.rmtree, directory, True)
        address = f"unix:{directory}/verifier.sock"
        own_connection = [("grpc.use_local_subchannel_pool", 1)]  # no state shared between the two
        fail_fast = specverify.Verifier(address, timeout=20, options=own_connection)
        self.addCleanup(fail_fast.close)
        start = time.monotonic()
        with self.assertRaises(specverify.VerifierError) as e:
            fail_fast.verify(pb.VerifyRequest(request_id="r1"))
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertLess(time.monotonic() - start, 10)

        waiting = specverify.Verifier(address, timeout=20, wait_for_ready=True, options=own_connection)
        self.addCleanup(waiting.close)
        outcome = {}

        def call():
            try:
                outcome["answer"] = waiting.verify(pb.VerifyRequest(request_id="r1"))
            except Exception as error:  # reported below
                outcome["error"] = error

        caller = threading.Thread(target=call)
        caller.start()
        # Longer than the retries' backoff: a fail-fast call would have failed by now.
        time.sleep(2)
        self.service = ScriptedVerifier([])
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_VerifierServicer_to_server(self.service, self.server)
        self.server.add_insecure_port(address)
        self.server.start()
        self.addCleanup(self.server.stop, None)
        caller.join(30)
        self.assertNotIn("error", outcome)
        self.assertEqual(outcome["answer"].request_id, "r1")
        self.assertEqual(len(self.service.request_bytes), 1)

    def test_a_service_config_of_the_callers_own_wins(self):
        # Retries off through the caller's config: the refusal comes back.
        address = self.serve([grpc.StatusCode.UNAVAILABLE])
        own = json.dumps({"methodConfig": [{"name": [{"service": "specverify.v1.Verifier"}]}]})
        verifier = specverify.Verifier(address, timeout=20, options=[("grpc.service_config", own)])
        self.addCleanup(verifier.close)
        with self.assertRaises(specverify.VerifierError) as e:
            verifier.verify(pb.VerifyRequest(request_id="r"))
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(len(self.service.request_bytes), 1)


if __name__ == "__main__":
    unittest.main()
