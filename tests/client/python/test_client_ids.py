"""Per-client accounts on a unix socket, from Python: gRPC reports every
client of a socket as the peer "unix:", so each Verifier names itself with the
specverify-client-id header and the server keeps an account per name (here
the KV arena quota): two Verifiers with names of their own have a quota each,
two that share a name share one; a malformed name is refused before any
call."""

import shutil
import tempfile
import unittest

import grpc
import numpy as np

import oracles
import specverify
from server_process import ServerProcess

ROW_BYTES = 4096
GAMMA = 8
REQUEST_BYTES = GAMMA * ROW_BYTES  # every draft accepted: the handle keeps them all


class ClientIdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="specverify-client-ids-")
        cls.server = ServerProcess("--device=cpu", "--kv_arena_bytes=8388608",
                                   f"--max_arena_bytes_per_client={2 * REQUEST_BYTES}",
                                   listen=f"unix:{cls.directory}/verifier.sock")

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        shutil.rmtree(cls.directory, True)
        if code != 0:
            raise AssertionError(f"server exited {code}: {cls.server.log()}")

    def verifier(self, client_id=None):
        v = specverify.Verifier(self.server.address, timeout=30, client_id=client_id,
                                options=[("grpc.use_local_subchannel_pool", 1)])
        self.addCleanup(v.close)
        return v

    def hold(self, verifier, seed):
        """Verifies one sequence whose rows stay behind a handle."""
        s = oracles.greedy_sequence(np.random.default_rng(seed), GAMMA, 100, ROW_BYTES, accept=GAMMA)
        result = verifier.verify_greedy(s.draft, s.target, draft_kv=s.kv, kv_return="handle")
        self.assertEqual(result[0].accepted_length, GAMMA)
        return result.kv_handle

    def assert_over_quota(self, verifier, seed, client):
        with self.assertRaises(specverify.VerifierError) as e:
            self.hold(verifier, seed)
        self.assertEqual(e.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn(f'client "unix:client-id={client}" holds {2 * REQUEST_BYTES} KV arena bytes',
                      e.exception.details)

    def test_each_verifier_has_an_account_of_its_own(self):
        flooder, calm = self.verifier(), self.verifier()
        self.assertNotEqual(flooder.client_id, calm.client_id)
        handles = [self.hold(flooder, 1), self.hold(flooder, 2)]
        self.assert_over_quota(flooder, 3, flooder.client_id)
        calm.release_kv(self.hold(calm, 4))  # its own quota
        flooder.release_kv(handles.pop())
        flooder.release_kv(self.hold(flooder, 5))
        flooder.release_kv(handles.pop())

    def test_verifiers_sharing_a_name_share_its_account(self):
        first, second = self.verifier("worker-a"), self.verifier("worker-a")
        handles = [self.hold(first, 6), self.hold(second, 7)]
        self.assert_over_quota(second, 8, "worker-a")
        for handle in handles:
            first.release_kv(handle)

    def test_a_malformed_name_is_refused_before_any_call(self):
        with self.assertRaisesRegex(ValueError, "client_id: metadata specverify-client-id has character "
                                                "code 32 at offset 3; must be 1-128"):
            specverify.Verifier(self.server.address, client_id="bad id")
        with self.assertRaisesRegex(ValueError, "has 129 characters"):
            specverify.Verifier(self.server.address, client_id="a" * 129)
        with self.assertRaisesRegex(TypeError, "client_id must be a str, got int"):
            specverify.Verifier(self.server.address, client_id=7)


if __name__ == "__main__":
    unittest.main()
