"""CUDA regions through the Python client, with torch CUDA tensors. Every
test skips (visibly; the module then exits 77, which CTest reports as
Skipped) where torch has no CUDA device.

* The export itself: the region's offset inside its cudaMalloc allocation
  agrees with torch's own IPC view of the storage, and another process that
  opens the handle reads the tensor's bytes at that offset.
* Against a CUDA server ($SPECVERIFY_SERVER --device=cuda:0): greedy with
  draft KV read from the region and the packed rows written back into it;
  sampled with both distributions in the region, equal to the inline answer.
* Against a CPU server: FAILED_PRECONDITION (the CPU backend cannot map
  CUDA memory).
"""

import subprocess
import sys
import unittest

import grpc
import numpy as np

import oracles
import specverify
from server_process import ServerProcess
from specverify import cuda_ipc

try:
    import torch
    CUDA = torch.cuda.is_available()
    WHY = "no CUDA device visible to torch"
except ImportError:
    torch, CUDA, WHY = None, False, "torch is not installed"

SENTINEL = 0xAB

_READER = r"""
import sys
from specverify import cuda_ipc
handle = bytes.fromhex(sys.argv[1])
data = cuda_ipc.read_exported(handle, int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
sys.stdout.write(data.hex())
"""


@unittest.skipUnless(CUDA, WHY)
class CudaExportTest(unittest.TestCase):
    def test_offset_agrees_with_torch_and_another_process_reads_the_bytes(self):
        # A view with a storage offset, of a storage that the caching
        # allocator carved out of a 2 MiB segment after another small one
        # (allocations under 1 MiB share segments): both the block's offset
        # in its cudaMalloc allocation and the view's offset count.
        before = torch.empty(200_000, dtype=torch.uint8, device="cuda")
        big = torch.arange(100_000, dtype=torch.int32, device="cuda")
        tensor = big[12345:12345 + 4096]
        region = specverify.CudaRegion("probe", tensor)
        self.assertEqual(region.byte_size, 4096 * 4)
        self.assertEqual(len(region.ipc_handle), cuda_ipc.IPC_HANDLE_BYTES)
        # torch's own IPC view of the same storage: (device, handle, size,
        # offset of the storage in its cudaMalloc block, ...). It also swaps
        # the storage's deleter for a reference-counted one, which is why the
        # client does not use it (specverify/cuda_ipc.py); harmless here.
        shared = tensor.untyped_storage()._share_cuda_()
        storage_offset_in_allocation = shared[3]
        self.assertEqual(region.allocation_offset,
                         storage_offset_in_allocation + tensor.storage_offset() * 4)
        torch.cuda.synchronize()
        out = subprocess.run(
            [sys.executable, "-c", _READER, region.ipc_handle.hex(), str(region.device_index),
             str(region.allocation_offset), str(region.byte_size)],
            check=True, capture_output=True, timeout=120).stdout
        got = np.frombuffer(bytes.fromhex(out.decode()), dtype=np.int32)
        np.testing.assert_array_equal(got, np.arange(12345, 12345 + 4096, dtype=np.int32))
        print(f"block offset in its allocation {storage_offset_in_allocation} B, view offset "
              f"{tensor.storage_offset() * 4} B, allocation {region.allocation_size} B")
        del before

    def test_tensors_inside_the_region_are_references(self):
        memory = torch.zeros(1 << 16, dtype=torch.uint8, device="cuda")
        region = specverify.CudaRegion("refs", memory)
        kv = region.allocate((4, 32), torch.uint8)
        self.assertEqual(region.offset_of(kv.data_ptr(), 128, kv.device.index), 0)
        p = region.allocate((5, 16), torch.float32)
        self.assertEqual(region.offset_of(p.data_ptr(), 320, p.device.index), 256)
        self.assertIsNone(region.offset_of(p.data_ptr(), 320, -1), "host memory matched")


@unittest.skipUnless(CUDA, WHY)
class CudaServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess("--device=cuda:0", "--kv_arena_bytes=8388608")
        cls.verifier = specverify.Verifier(cls.server.address, timeout=60)
        cls.verifier.wait_until_serving()

    @classmethod
    def tearDownClass(cls):
        cls.verifier.close()
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"server exited {code}: {cls.server.log()}")

    def test_greedy_rows_read_and_returned_in_device_memory(self):
        self.assertIn("cuda", self.verifier.server_info().region_kinds)
        rng = np.random.default_rng(61)
        region = self.verifier.register_cuda_region(
            torch.zeros(1 << 20, dtype=torch.uint8, device="cuda"), "gpu-greedy")
        sequences = [oracles.greedy_sequence(rng, g, 1000, 256) for g in (8, 2, 8, 5)]
        kv = [region.allocate(s.kv.shape, torch.uint8) for s in sequences]
        for view, s in zip(kv, sequences):
            view.copy_(torch.from_numpy(s.kv))
        total = sum(len(s.draft) for s in sequences)
        out = region.allocate((total, 256), torch.uint8)
        out.fill_(SENTINEL)
        request = self.verifier.greedy_request(
            [torch.from_numpy(s.draft).cuda() for s in sequences],
            [torch.from_numpy(s.target).cuda() for s in sequences], draft_kv=kv, kv_output=out)
        for seq in request.sequences:
            self.assertEqual(seq.WhichOneof("kv"), "draft_kv_ref")
        result = self.verifier.verify(request)
        for r, s in zip(result, sequences):
            self.assertEqual((r.accepted_length, r.next_token), (s.accepted, s.next_token))
        packed = result.packed_rows
        np.testing.assert_array_equal(out[:packed].cpu().numpy(), oracles.packed_rows(sequences))
        self.assertTrue(bool((out[packed:] == SENTINEL).all()), "rows past the packed count changed")
        self.assertEqual(self.verifier.unregister_region(region), 0)
        region.close()

    def test_sampled_by_reference_equals_inline(self):
        rng = np.random.default_rng(62)
        vocab, gamma, count = 4096, 6, 4
        region = self.verifier.register_cuda_region(
            torch.zeros(4 << 20, dtype=torch.uint8, device="cuda"), "gpu-sampled")
        p = region.allocate((count, gamma + 1, vocab), torch.float32)
        q = region.allocate((count, gamma, vocab), torch.float32)
        p.copy_(torch.from_numpy(rng.dirichlet(np.full(vocab, 0.05), size=(count, gamma + 1))))
        q.copy_(torch.from_numpy(rng.dirichlet(np.full(vocab, 0.05), size=(count, gamma))))
        qn = q.double().cpu().numpy()
        drafts = np.array([[rng.choice(vocab, p=qn[i, j] / qn[i, j].sum()) for j in range(gamma)]
                           for i in range(count)], dtype=np.int32)
        by_ref = self.verifier.sampled_request(drafts, p, draft=q, seed=3)
        self.assertEqual(by_ref.sequences[0].sampled.target.WhichOneof("source"), "values_ref")
        inline = self.verifier.sampled_request(drafts, p.cpu(), draft=q.cpu(), seed=3)
        self.assertEqual(self.verifier.verify(by_ref).results,
                         self.verifier.verify(inline).results)
        self.verifier.unregister_region(region)
        region.close()


@unittest.skipUnless(CUDA, WHY)
class CudaRegionOnCpuServerTest(unittest.TestCase):
    def test_failed_precondition(self):
        with ServerProcess("--device=cpu") as server, \
                specverify.Verifier(server.address) as verifier:
            verifier.wait_until_serving()
            with self.assertRaises(specverify.VerifierError) as e:
                verifier.register_cuda_region(torch.zeros(4096, dtype=torch.uint8,
                                                          device="cuda"), "nope")
            self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)


if __name__ == "__main__":
    unittest.main()
