"""The specverify Python client against a real CPU server on loopback:
greedy and sampled verification from numpy and torch inputs, checked against
oracles; KV inline / handle / none; FetchKv and ReleaseKv; futures and
VerifyStream; errors with their status codes."""

import threading
import unittest

import grpc
import numpy as np

import oracles
import specverify
from server_process import ServerProcess
from specverify import pb

try:
    import torch
except ImportError:  # Debian: python3-torch (scripts/install-deps.sh)
    torch = None

# Pearson chi-square critical value for 5 degrees of freedom at p = 0.001
# (the six-token distributions below). The seeds are fixed, so the test is
# deterministic; a correct sampler exceeds it with probability 1/1000 over
# choices of seed, a wrong one (e.g. emitting the draft's distribution) by
# hundreds.
CHI2_DF5_P001 = 20.515


class ClientTest(unittest.TestCase):
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

    # ---------------------------------------------------------------- info --

    def test_server_info_and_health(self):
        info = self.verifier.server_info()
        self.assertEqual(info.backend, "cpu")
        # The package and the server come from one build: same release.
        self.assertEqual(info.version.split("+")[0], specverify.__version__)
        self.assertIn("greedy", info.modes)
        self.assertIn("sampled", info.modes)
        self.assertGreater(info.limits.max_sequences_per_request, 0)
        self.assertTrue(self.verifier.check_health())
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.check_health("no.such.Service")
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    # -------------------------------------------------------------- greedy --

    def check_greedy(self, result, sequences, kv=None):
        self.assertEqual(len(result), len(sequences))
        for i, (r, s) in enumerate(zip(result, sequences)):
            self.assertEqual(r.accepted_length, s.accepted, f"sequence {i}")
            self.assertEqual(r.next_token, s.next_token, f"sequence {i}")
            self.assertEqual(r.mismatch, s.accepted < len(s.draft), f"sequence {i}")
            self.assertEqual(r.kv_row_count, s.accepted, f"sequence {i}")
        if kv is not None:
            np.testing.assert_array_equal(kv, oracles.packed_rows(sequences))

    def test_greedy_ragged_batches_match_the_oracle(self):
        rng = np.random.default_rng(1301)
        for batch in range(8):
            sequences = [
                oracles.greedy_sequence(rng, gamma=int(rng.integers(1, 17)), vocab=50,
                                        row_bytes=24) for _ in range(int(rng.integers(1, 12)))
            ]
            result = self.verifier.verify_greedy(
                [s.draft for s in sequences], [s.target for s in sequences],
                draft_kv=[s.kv for s in sequences], vocab_size=50, kv_return="inline",
                request_id=f"ragged-{batch}")
            self.assertEqual(result.request_id, f"ragged-{batch}")
            self.assertTrue(result.verified)
            self.check_greedy(result, sequences, result.kv_rows())
            for i, s in enumerate(sequences):
                np.testing.assert_array_equal(result.sequence_kv_rows(i), s.kv[:s.accepted])

    def test_greedy_every_accept_length_one_sequence(self):
        rng = np.random.default_rng(7)
        for accept in range(0, 9):
            s = oracles.greedy_sequence(rng, gamma=8, vocab=1000, row_bytes=8, accept=accept)
            # A single sequence: plain lists work too.
            result = self.verifier.verify_greedy(s.draft.tolist(), s.target.tolist(),
                                                 draft_kv=s.kv, kv_return="inline")
            self.check_greedy(result, [s], result.kv_rows())

    def test_greedy_two_dimensional_arrays(self):
        rng = np.random.default_rng(11)
        sequences = [oracles.greedy_sequence(rng, 6, 30, 16) for _ in range(5)]
        drafts = np.stack([s.draft for s in sequences])
        targets = np.stack([s.target for s in sequences])
        kv = np.stack([s.kv for s in sequences]).view(np.float32)  # [5, 6, 4] float32
        result = self.verifier.verify_greedy(drafts, targets, draft_kv=kv, kv_return="inline")
        self.check_greedy(result, sequences)
        self.assertEqual(result.kv_rows().dtype, np.float32)
        np.testing.assert_array_equal(result.kv_rows().view(np.uint8),
                                      oracles.packed_rows(sequences))

    @unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")
    def test_greedy_from_torch_cpu_tensors(self):
        rng = np.random.default_rng(12)
        sequences = [oracles.greedy_sequence(rng, 5, 40, 8) for _ in range(4)]
        for dtype, wire in ((torch.float16, pb.DATA_TYPE_FLOAT16),
                            (torch.bfloat16, pb.DATA_TYPE_BFLOAT16)):
            kv = [torch.from_numpy(s.kv.copy()).view(dtype) for s in sequences]  # [5, 4]
            request = self.verifier.greedy_request(
                torch.from_numpy(np.stack([s.draft for s in sequences])),
                [torch.from_numpy(s.target) for s in sequences], draft_kv=kv,
                kv_return="inline")
            self.assertEqual(request.sequences[0].draft_kv.dtype, wire)
            self.assertEqual(list(request.sequences[0].draft_kv.shape), [5, 4])
            result = self.verifier.verify(request)
            self.check_greedy(result, sequences)
            np.testing.assert_array_equal(result.kv_rows().view(np.uint8),
                                          oracles.packed_rows(sequences))

    def test_non_contiguous_arrays_travel_inline_with_their_elements(self):
        rng = np.random.default_rng(13)
        s = oracles.greedy_sequence(rng, 4, 20, 16)
        wide = np.zeros((4, 32), np.uint8)
        wide[:, ::2] = s.kv
        result = self.verifier.verify_greedy(s.draft, s.target, draft_kv=wide[:, ::2],
                                             kv_return="inline")
        self.check_greedy(result, [s], result.kv_rows())

    # ------------------------------------------------------------------ KV --

    def test_kv_handle_fetch_and_release(self):
        rng = np.random.default_rng(21)
        sequences = [oracles.greedy_sequence(rng, 8, 100, 4096, accept=a) for a in (8, 3, 0, 6)]
        result = self.verifier.verify_greedy([s.draft for s in sequences],
                                             [s.target for s in sequences],
                                             draft_kv=[s.kv for s in sequences],
                                             kv_return="handle")
        self.check_greedy(result, sequences)
        handle = result.kv_handle
        self.assertIsNotNone(handle)
        self.assertEqual(handle.num_rows, 17)
        self.assertEqual(handle.row_bytes, 4096)
        expected = oracles.packed_rows(sequences)
        whole = self.verifier.fetch_kv(handle, chunk_bytes=4096)
        np.testing.assert_array_equal(result.kv_rows(whole), expected)
        part = self.verifier.fetch_kv(handle.id, first_row=8, num_rows=3)
        np.testing.assert_array_equal(result.kv_rows(part), expected[8:11])
        self.assertEqual(self.verifier.release_kv(handle), 17 * 4096)
        for call in (lambda: self.verifier.fetch_kv(handle),
                     lambda: self.verifier.release_kv(handle)):
            with self.assertRaises(specverify.VerifierError) as e:
                call()
            self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_fetch_and_release_after(self):
        rng = np.random.default_rng(22)
        s = oracles.greedy_sequence(rng, 8, 100, 64, accept=5)
        result = self.verifier.verify_greedy(s.draft, s.target, draft_kv=s.kv)  # default: handle
        self.assertIsNotNone(result.kv_handle)
        rows = result.kv_rows(self.verifier.fetch_kv(result.kv_handle, release_after=True))
        np.testing.assert_array_equal(rows, s.kv[:5])
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.release_kv(result.kv_handle)
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_kv_return_none_keeps_no_rows(self):
        rng = np.random.default_rng(23)
        s = oracles.greedy_sequence(rng, 8, 100, 64, accept=5)
        result = self.verifier.verify_greedy(s.draft, s.target, draft_kv=s.kv, kv_return="none")
        self.check_greedy(result, [s])
        self.assertIsNone(result.kv_handle)
        self.assertEqual(result.kv_inline, b"")

    # -------------------------------------------------------------- errors --

    def test_invalid_argument_names_the_field(self):
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.verify_greedy([1, 2, 3], [1, 2, 3])  # gamma + 1 targets needed
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("target_tokens", e.exception.details)
        with self.assertRaises(specverify.VerifierError) as e:
            self.verifier.verify_greedy([1, 2, 60], [1, 2, 3, 4], vocab_size=50)
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("draft_tokens", e.exception.details)

    def test_client_side_argument_errors(self):
        with self.assertRaises(TypeError):
            self.verifier.sampled_request([1], np.full((2, 4), 0.25))  # float64
        with self.assertRaises(ValueError):
            self.verifier.greedy_request([[1, 2], [3]], [[1, 2, 3]])  # 2 drafts, 1 target
        with self.assertRaisesRegex(ValueError, "kv_output"):
            self.verifier.greedy_request([1], [1, 2], draft_kv=np.zeros((1, 4), np.uint8),
                                         kv_output=np.zeros((1, 4), np.uint8))
        with self.assertRaises(ValueError):
            self.verifier.greedy_request([1], [1, 2], kv_return="somewhere")

    # ------------------------------------------------------------- sampled --

    def test_sampled_deterministic_cases(self):
        rng = np.random.default_rng(31)
        vocab = 64
        for gamma in (1, 4, 9):
            cases = [oracles.deterministic_sampled(rng, gamma, vocab, a) for a in range(gamma + 1)]
            kvs = [rng.integers(0, 256, size=(gamma, 8), dtype=np.uint8) for _ in cases]
            result = self.verifier.verify_sampled(
                [c[0] for c in cases], np.stack([c[1] for c in cases]), seed=gamma,
                draft_kv=kvs, kv_return="inline")
            self.assertTrue(result.exact)
            for a, (r, c) in enumerate(zip(result, cases)):
                self.assertEqual(r.accepted_length, a, f"gamma {gamma}")
                self.assertEqual(r.next_token, c[2], f"gamma {gamma}, accept {a}")
            np.testing.assert_array_equal(
                result.kv_rows(), np.concatenate([kv[:a] for a, kv in enumerate(kvs)]))

    def test_sampled_with_draft_probabilities_logits_and_half_precision(self):
        rng = np.random.default_rng(32)
        vocab, gamma = 40, 5
        draft, target, nxt = oracles.deterministic_sampled(rng, gamma, vocab, 3)
        # Draft probabilities one-hot on the draft tokens behave as a
        # deterministic drafter.
        q = np.stack([oracles.one_hot(vocab, t) for t in draft])
        bf16 = lambda a: specverify.Typed((a.astype(np.float32).view(np.uint32) >> 16)
                                          .astype(np.uint16), "bfloat16")
        # Logits: 0 where p = 1, -1e4 elsewhere (softmax is one-hot to fp32);
        # uniform rows stay uniform.
        logits = np.where(target > 0.5, 0.0, -1e4).astype(np.float32)
        logits[target.max(axis=1) < 0.5] = 0.0
        variants = {
            "probabilities fp32": dict(target=target, draft=q),
            "probabilities fp16": dict(target=target.astype(np.float16),
                                       draft=q.astype(np.float16)),
            "probabilities bf16": dict(target=bf16(target), draft=bf16(q)),
            "logits fp32": dict(target=logits, kind="logits", temperature=1.0),
            # log(target): -inf where p = 0 (valid: probability 0).
            "log-probabilities fp32": dict(target=np.log(target, where=target > 0,
                                                         out=np.full_like(target, -np.inf)),
                                           draft=np.log(q, where=q > 0, out=np.full_like(q, -np.inf)),
                                           kind="log_probabilities"),
        }
        for name, kwargs in variants.items():
            result = self.verifier.verify_sampled(draft, seed=5, **kwargs)
            self.assertEqual((result[0].accepted_length, result[0].next_token), (3, nxt), name)

    def test_sampled_same_seed_same_tokens(self):
        rng = np.random.default_rng(33)
        vocab, gamma, count = 16, 6, 32
        p = rng.dirichlet(np.ones(vocab), size=(count, gamma + 1)).astype(np.float32)
        q = rng.dirichlet(np.ones(vocab), size=(count, gamma)).astype(np.float32)
        drafts = np.array([[rng.choice(vocab, p=q[i, j] / q[i, j].sum()) for j in range(gamma)]
                           for i in range(count)], dtype=np.int32)
        request = self.verifier.sampled_request(drafts, p, draft=q, seed=99)
        first = self.verifier.verify(request)
        again = self.verifier.verify(request)
        self.assertEqual(first.results, again.results)
        other = self.verifier.verify_sampled(drafts, p, draft=q, seed=100)
        self.assertNotEqual(first.results, other.results)
        for r, row_p, row_q, d in zip(first, p, q, drafts):
            self.assertGreaterEqual(r.accepted_length, 0)
            self.assertLessEqual(r.accepted_length, gamma)
            k = r.accepted_length
            # The next token has mass in max(0, p_k - q_k) (or in p_gamma).
            residual = row_p[k] - row_q[k] if k < gamma else row_p[gamma]
            self.assertGreater(residual[r.next_token], 0)

    def test_sampled_first_token_frequencies_match_the_target(self):
        vocab, gamma = 6, 2
        p0 = np.array([0.35, 0.25, 0.2, 0.12, 0.08, 0.0], np.float32)
        q0 = np.array([0.05, 0.1, 0.15, 0.2, 0.25, 0.25], np.float32)  # far from p0
        rest = np.full((gamma, vocab), 1.0 / vocab, np.float32)
        target = np.concatenate([p0[None], rest])
        draft_rows = np.concatenate([q0[None], rest[:1]])
        rng = np.random.default_rng(34)
        counts = np.zeros(vocab, np.int64)
        per_request, requests = 250, 12
        for seed in range(requests):
            drafts = np.stack([rng.choice(vocab, size=gamma, p=q0) for _ in range(per_request)])
            result = self.verifier.verify_sampled(
                drafts.astype(np.int32), np.broadcast_to(target, (per_request,) + target.shape),
                draft=np.broadcast_to(draft_rows, (per_request,) + draft_rows.shape),
                seed=1000 + seed)
            for r, d in zip(result, drafts):
                first = d[0] if r.accepted_length >= 1 else r.next_token
                counts[first] += 1
        self.assertEqual(counts[5], 0, f"token of zero target probability emitted: {counts}")
        statistic = oracles.chi_square(counts, p0 / p0.sum())
        self.assertLess(statistic, CHI2_DF5_P001, f"counts {counts.tolist()} vs p {p0.tolist()}")

    # ---------------------------------------------------- futures, streams --

    def test_verify_async_many_in_flight(self):
        rng = np.random.default_rng(41)
        work = []
        for i in range(24):
            sequences = [oracles.greedy_sequence(rng, 8, 100, 32) for _ in range(3)]
            request = self.verifier.greedy_request(
                [s.draft for s in sequences], [s.target for s in sequences],
                draft_kv=[s.kv for s in sequences], kv_return="inline", request_id=f"a{i}")
            work.append((self.verifier.verify_async(request), sequences))
        for future, sequences in work:
            result = future.result(timeout=30)
            self.check_greedy(result, sequences, result.kv_rows())
        bad = self.verifier.verify_async(self.verifier.greedy_request([1, 2], [1]))
        with self.assertRaises(specverify.VerifierError) as e:
            bad.result(timeout=30)
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)

    def test_stream_answers_each_request_and_survives_a_bad_one(self):
        rng = np.random.default_rng(42)
        work = []
        with self.verifier.stream() as stream:
            for i in range(40):
                if i == 17:
                    bad = stream.send(self.verifier.greedy_request([1, 2, 3], [1],
                                                                   request_id="bad"))
                    continue
                sequences = [oracles.greedy_sequence(rng, 4, 50, 16) for _ in range(2)]
                request = self.verifier.greedy_request(
                    [s.draft for s in sequences], [s.target for s in sequences],
                    draft_kv=[s.kv for s in sequences], kv_return="inline")
                work.append((stream.send(request), sequences))
            for future, sequences in work:
                result = future.result(timeout=30)
                self.check_greedy(result, sequences, result.kv_rows())
            with self.assertRaises(specverify.VerifierError) as e:
                bad.result(timeout=30)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("target_tokens", e.exception.details)
        ids = {f.result().request_id for f, _ in work}
        self.assertEqual(len(ids), len(work))

    def test_stream_from_many_threads(self):
        rng = np.random.default_rng(43)
        inputs = [[oracles.greedy_sequence(rng, 3, 20, 8)] for _ in range(64)]
        futures = [None] * len(inputs)
        with self.verifier.stream() as stream:
            def send(lo, hi):
                for i in range(lo, hi):
                    futures[i] = stream.send(self.verifier.greedy_request(
                        inputs[i][0].draft, inputs[i][0].target, draft_kv=inputs[i][0].kv,
                        kv_return="inline"))
            threads = [threading.Thread(target=send, args=(t * 16, t * 16 + 16))
                       for t in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for future, sequences in zip(futures, inputs):
            result = future.result(timeout=0)
            self.check_greedy(result, sequences, result.kv_rows())

    def test_stream_rejects_a_duplicate_id_in_flight(self):
        with self.verifier.stream() as stream:
            request = self.verifier.greedy_request([1], [1, 2], request_id="same")
            first = stream.send(request)
            try:
                stream.send(self.verifier.greedy_request([1], [1, 2], request_id="same"))
            except ValueError:
                pass  # the first was still in flight
            else:
                self.assertTrue(first.done(), "a duplicate id in flight was accepted")
            self.assertEqual(first.result(timeout=30)[0].accepted_length, 1)


if __name__ == "__main__":
    unittest.main()
