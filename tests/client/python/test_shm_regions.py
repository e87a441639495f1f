"""Shared-memory regions through the Python client against a real CPU server:
registration, listing, arrays inside a region sent as TensorRefs (offsets
from their addresses), KV_RETURN_REGION, and the same answers as inline
requests."""

import os
import unittest

import grpc
import numpy as np

import oracles
import specverify
from server_process import ServerProcess

try:
    import torch
except ImportError:
    torch = None

SENTINEL = 0xAB  # bytes of the output region the server must not touch


class ShmRegionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess("--device=cpu", "--kv_arena_bytes=8388608")
        cls.verifier = specverify.Verifier(cls.server.address, timeout=30)
        cls.verifier.wait_until_serving()

    @classmethod
    def tearDownClass(cls):
        cls.verifier.close()
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"server exited {code}: {cls.server.log()}")

    def region(self, name, size):
        region = self.verifier.register_shm_region(name, size)

        def cleanup():
            if name in self.verifier.regions:
                self.verifier.unregister_region(region)
            region.close()

        self.addCleanup(cleanup)
        return region

    def test_register_list_unregister(self):
        info = self.verifier.server_info()
        self.assertIn("system", info.region_kinds)
        region = self.verifier.register_shm_region("listed", 1 << 16)
        path = f"/dev/shm/{region.shm_name}"
        self.assertTrue(os.path.exists(path), path)
        listed = {r.name: r for r in self.verifier.list_regions()}
        self.assertIn("listed", listed)
        self.assertEqual(listed["listed"].kind, specverify.pb.REGION_KIND_SYSTEM)
        self.assertEqual(listed["listed"].byte_size, 1 << 16)
        self.assertEqual(listed["listed"].device_ordinal, -1)
        self.assertEqual(self.verifier.unregister_region(region), 0)
        self.assertNotIn("listed", {r.name for r in self.verifier.list_regions()})
        region.close()
        self.assertFalse(os.path.exists(path), f"{path} left behind")
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.unregister_region("listed")
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_duplicate_name_is_already_exists(self):
        self.region("twice", 4096)
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.register_shm_region("twice", 4096, shm_name=f"sv-other-{os.getpid()}")
        self.assertEqual(e.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertFalse(os.path.exists(f"/dev/shm/sv-other-{os.getpid()}"),
                         "a failed registration left its shared memory behind")

    def test_greedy_rows_by_reference_into_a_region(self):
        rng = np.random.default_rng(51)
        region = self.region("greedy", 1 << 20)
        sequences = [oracles.greedy_sequence(rng, g, 100, 48) for g in (8, 3, 5, 8, 1)]
        kv = [region.allocate(s.kv.shape, np.uint8) for s in sequences]
        for view, s in zip(kv, sequences):
            view[:] = s.kv
        total = sum(len(s.draft) for s in sequences)
        out = region.allocate((total, 48), np.uint8)
        out[:] = SENTINEL
        request = self.verifier.greedy_request([s.draft for s in sequences],
                                               [s.target for s in sequences], draft_kv=kv,
                                               kv_output=out)
        self.assertEqual(request.kv_return, specverify.pb.KV_RETURN_REGION)
        for view, seq in zip(kv, request.sequences):
            self.assertEqual(seq.WhichOneof("kv"), "draft_kv_ref")
            self.assertEqual(seq.draft_kv_ref.region, "greedy")
            self.assertEqual(seq.draft_kv_ref.offset_bytes,
                             view.__array_interface__["data"][0] - region.address)
            self.assertEqual(list(seq.draft_kv_ref.shape), list(view.shape))
        self.assertEqual(request.kv_output.offset_bytes,
                         out.__array_interface__["data"][0] - region.address)
        result = self.verifier.verify(request)
        for r, s in zip(result, sequences):
            self.assertEqual((r.accepted_length, r.next_token), (s.accepted, s.next_token))
        packed = result.packed_rows
        np.testing.assert_array_equal(out[:packed], oracles.packed_rows(sequences))
        self.assertTrue((out[packed:] == SENTINEL).all(), "rows past the packed count changed")
        self.assertIsNone(result.kv_handle)
        self.assertEqual(result.kv_inline, b"")

    def test_region_inputs_with_inline_return(self):
        rng = np.random.default_rng(52)
        region = self.region("mixed", 1 << 16)
        s = oracles.greedy_sequence(rng, 6, 50, 32, accept=4)
        kv = region.allocate(s.kv.shape, np.uint8)
        kv[:] = s.kv
        result = self.verifier.verify_greedy(s.draft, s.target, draft_kv=kv, kv_return="inline")
        self.assertEqual(result[0].accepted_length, 4)
        np.testing.assert_array_equal(result.kv_rows(), s.kv[:4])

    def test_sampled_by_reference_equals_inline(self):
        rng = np.random.default_rng(53)
        vocab, gamma, count = 200, 5, 6
        region = self.region("sampled", 1 << 20)
        p = region.allocate((count, gamma + 1, vocab), np.float32)
        q = region.allocate((count, gamma, vocab), np.float32)
        p[:] = rng.dirichlet(np.full(vocab, 0.3), size=(count, gamma + 1))
        q[:] = rng.dirichlet(np.full(vocab, 0.3), size=(count, gamma))
        drafts = np.array([[rng.choice(vocab, p=q[i, j] / q[i, j].sum()) for j in range(gamma)]
                           for i in range(count)], dtype=np.int32)
        by_ref = self.verifier.sampled_request(drafts, p, draft=q, seed=7)
        self.assertEqual(by_ref.sequences[2].sampled.target.WhichOneof("source"), "values_ref")
        self.assertEqual(by_ref.sequences[2].sampled.draft.WhichOneof("source"), "values_ref")
        inline = self.verifier.sampled_request(drafts, p.copy(), draft=q.copy(), seed=7)
        self.assertEqual(inline.sequences[2].sampled.target.WhichOneof("source"), "values")
        self.assertEqual(self.verifier.verify(by_ref).results,
                         self.verifier.verify(inline).results)

    @unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")
    def test_torch_cpu_tensor_inside_the_region_is_a_reference(self):
        rng = np.random.default_rng(54)
        region = self.region("torchcpu", 1 << 16)
        s = oracles.greedy_sequence(rng, 4, 50, 16, accept=2)
        kv = torch.from_numpy(region.allocate(s.kv.shape, np.uint8))
        kv.copy_(torch.from_numpy(s.kv))
        out = torch.from_numpy(region.allocate((4, 16), np.uint8))
        request = self.verifier.greedy_request(s.draft, s.target, draft_kv=kv, kv_output=out)
        self.assertEqual(request.sequences[0].WhichOneof("kv"), "draft_kv_ref")
        result = self.verifier.verify(request)
        self.assertEqual(result[0].accepted_length, 2)
        np.testing.assert_array_equal(out[:2].numpy(), s.kv[:2])

    def test_request_naming_an_unregistered_region_fails(self):
        rng = np.random.default_rng(55)
        region = self.verifier.register_shm_region("gone", 1 << 16)
        s = oracles.greedy_sequence(rng, 4, 50, 16)
        kv = region.allocate(s.kv.shape, np.uint8)
        kv[:] = s.kv
        request = self.verifier.greedy_request(s.draft, s.target, draft_kv=kv,
                                               kv_return="inline")
        self.verifier.unregister_region(region)
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.verify(request)
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertIn("gone", e.exception.details)
        del kv
        region.close()
        # Once unregistered, the client sends such arrays inline again.
        again = self.verifier.greedy_request(s.draft, s.target, draft_kv=s.kv)
        self.assertEqual(again.sequences[0].WhichOneof("kv"), "draft_kv")

    def test_arrays_outside_or_misaligned_travel_inline(self):
        region = self.region("align", 1 << 16)
        raw = region.ndarray((1024,), np.uint8, offset=0)
        p = raw[1:1 + 64].view(np.float32).reshape(2, 8)  # offset 1: not a multiple of 4
        request = self.verifier.sampled_request([1], p)
        self.assertEqual(request.sequences[0].sampled.target.WhichOneof("source"), "values")
        outside = np.zeros((2, 8), np.float32)
        request = self.verifier.sampled_request([1], outside)
        self.assertEqual(request.sequences[0].sampled.target.WhichOneof("source"), "values")
        aligned = region.ndarray((2, 8), np.float32, offset=64)
        request = self.verifier.sampled_request([1], aligned)
        self.assertEqual(request.sequences[0].sampled.target.values_ref.offset_bytes, 64)


if __name__ == "__main__":
    unittest.main()
