#!/usr/bin/env python3
"""Seed 000's PyTorch eager baselines for greedy verify-and-pack, timed the
way the seed timed them: per-call CUDA events, warm-up, median and p95.

  verify    compute_accepted_lengths as a composition of ATen ops (eq, any,
            argmax, where, gather): one eager launch each.
  two_step  verify, then pack with kv[mask] (the CUB-backed mask-and-gather
            the seed's stand-alone packer lost to).

Same grid as bench/greedy/greedy_bench.cc (b, gamma, alpha, row bytes), padded
[b, gamma] layout as in the seed, inputs rotated among copies like the C++
bench. Writes a CSV: b,gamma,alpha,row_bytes,path,median_us,p95_us,mean_us.
"""
import argparse
import csv
import statistics
import sys

MAX_DRAFT_KV_BYTES = 512 << 20
WARMUP = 20


def grid(quick):
    if quick:
        return [1, 32, 1024], [8, 128], [0.6, 0.9], [256, 4096]
    return ([1, 4, 16, 32, 256, 1024, 4096], [4, 8, 16, 32, 64, 128, 256],
            [0.3, 0.6, 0.9], [256, 4096])


def make_inputs(torch, b, gamma, alpha, row_bytes, seed, device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    k = torch.distributions.Binomial(gamma, torch.full((b,), alpha)).sample().to(torch.int64)
    draft = torch.randint(0, 32000, (b, gamma), generator=g, dtype=torch.int64)
    target = torch.randint(0, 32000, (b, gamma + 1), generator=g, dtype=torch.int64)
    pos = torch.arange(gamma + 1)[None, :]
    agree = pos < k[:, None]
    target = torch.where(agree, torch.cat([draft, draft[:, :1]], dim=1), target)
    # Force a mismatch at k when k < gamma.
    at_k = (pos == k[:, None]) & (k[:, None] < gamma)
    target = torch.where(at_k & (target == torch.cat([draft, draft[:, :1]], 1)),
                         (target + 1) % 32000, target)
    # KV on the device directly: host randn of ~100 MB per point would cost
    # more than the timing itself.
    kv = torch.randn(b, gamma, row_bytes // 2, device=device, dtype=torch.float16)
    return draft.to(device), target.to(device), kv, int(k.sum())


def verify(torch, draft, target):
    gamma = draft.shape[1]
    mismatch = draft != target[:, :gamma]
    has_mismatch = mismatch.any(dim=1)
    first = mismatch.to(torch.int64).argmax(dim=1)
    k = torch.where(has_mismatch, first, torch.full_like(first, gamma))
    next_tokens = target.gather(1, k.unsqueeze(1)).squeeze(1)
    return k, next_tokens, has_mismatch


def two_step(torch, draft, target, kv):
    k, next_tokens, has_mismatch = verify(torch, draft, target)
    mask = torch.arange(draft.shape[1], device=draft.device)[None, :] < k[:, None]
    return k, next_tokens, has_mismatch, kv[mask]


def time_it(torch, fn, copies, runs):
    for i in range(WARMUP):
        fn(i % copies)
    torch.cuda.synchronize()
    samples = []
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for i in range(runs):
        start.record()
        fn(i % copies)
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0)
    samples.sort()
    return (samples[len(samples) // 2], samples[min(len(samples) - 1, len(samples) * 95 // 100)],
            statistics.fmean(samples))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default="greedy_torch.csv")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("greedy_torch_baseline: torch not installed; nothing measured (skip)")
        return 0
    if not torch.cuda.is_available():
        print("greedy_torch_baseline: no CUDA device; nothing measured (skip)")
        return 0
    device = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    bs, gammas, alphas, rows = grid(args.quick)
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["b", "gamma", "alpha", "row_bytes", "path", "median_us", "p95_us", "mean_us"])
        for b in bs:
            for gamma in gammas:
                for alpha in alphas:
                    for row_bytes in rows:
                        kv_bytes = b * gamma * row_bytes
                        if kv_bytes > MAX_DRAFT_KV_BYTES:
                            continue
                        copies = max(2, min(64, -(-2 * l2 // kv_bytes)))
                        data = [make_inputs(torch, b, gamma, alpha, row_bytes,
                                            1000 * b + gamma + c, device) for c in range(copies)]
                        # Parity of the two-step output size with its own oracle.
                        _, _, _, packed = two_step(torch, *data[0][:3])
                        assert packed.shape[0] == data[0][3], "torch two_step packs wrong rows"
                        res = {}
                        res["torch_verify"] = time_it(
                            torch, lambda c: verify(torch, data[c][0], data[c][1]), copies, args.runs)
                        res["torch_two_step"] = time_it(
                            torch, lambda c: two_step(torch, *data[c][:3]), copies, args.runs)
                        for path, (med, p95, mean) in res.items():
                            w.writerow([b, gamma, f"{alpha:.2f}", row_bytes, path,
                                        f"{med:.3f}", f"{p95:.3f}", f"{mean:.3f}"])
                        f.flush()
                        print(f"b={b:5d} gamma={gamma:4d} alpha={alpha:.1f} row={row_bytes:5d} "
                              f"verify={res['torch_verify'][0]:8.2f}us two_step={res['torch_two_step'][0]:8.2f}us",
                              flush=True)
                        del data
                        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
