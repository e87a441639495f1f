#!/usr/bin/env python3
"""Vectorized PyTorch rejection sampling (issue #8 baseline), timed like the
CUDA benchmark: CUDA events around each call, >= 200 samples after warm-up,
median and p95, inputs rotated among copies totalling > 2x the L2 cache.

Two implementations, both fully vectorized over the batch (no Python loop
over sequences), fp32:
  torch_full   - the common formulation (HF transformers / seed 003's
                 baseline): residual max(0, p - q) over all gamma rows, then
                 pick the row at the first rejection and sample it.
  torch_gather - a tuned variant that gathers only the two scalars per draft
                 position and the one row per sequence it samples from.
Logits inputs are turned into probabilities with softmax(z / T) first (both
target and draft rows), as an engine would.

Usage: sampling_torch_baseline.py [--csv out.csv] [--runs N] [--quick]
"""
import argparse
import csv
import sys

import torch

L2_ROTATION_BYTES = 100 << 20
MAX_COPIES = 64
WARMUP = 20


def first_rejection(p_d, q_d, u, gamma):
    accept = u * q_d <= p_d
    rejected = ~accept
    k = torch.where(rejected.any(-1), rejected.to(torch.int32).argmax(-1),
                    torch.full_like(rejected[:, 0], gamma, dtype=torch.int64))
    return k


def torch_full(p, q, draft, u):
    b, g1, v = p.shape
    gamma = g1 - 1
    idx = draft.unsqueeze(-1)
    p_d = p[:, :gamma].gather(-1, idx).squeeze(-1)
    q_d = q.gather(-1, idx).squeeze(-1)
    k = first_rejection(p_d, q_d, u, gamma)
    residual = (p[:, :gamma] - q).clamp_min(0.0)
    residual = torch.cat([residual, p[:, gamma:]], dim=1)
    rows = residual[torch.arange(b, device=p.device), k]
    rows = rows / rows.sum(-1, keepdim=True)
    nxt = torch.multinomial(rows, 1).squeeze(-1)
    return k, nxt


def torch_gather(p, q, draft, u):
    b, g1, v = p.shape
    gamma = g1 - 1
    idx = draft.unsqueeze(-1)
    p_d = p[:, :gamma].gather(-1, idx).squeeze(-1)
    q_d = q.gather(-1, idx).squeeze(-1)
    k = first_rejection(p_d, q_d, u, gamma)
    ar = torch.arange(b, device=p.device)
    p_row = p[ar, k]
    q_row = q[ar, k.clamp_max(gamma - 1)] * (k < gamma).unsqueeze(-1)
    rows = (p_row - q_row).clamp_min(0.0)
    nxt = torch.multinomial(rows / rows.sum(-1, keepdim=True), 1).squeeze(-1)
    return k, nxt


def with_softmax(fn, temperature):
    def run(z_p, z_q, draft, u):
        return fn(torch.softmax(z_p / temperature, -1), torch.softmax(z_q / temperature, -1), draft, u)
    return run


def time_it(fn, copies, runs):
    for i in range(WARMUP):
        fn(*copies[i % len(copies)])
    torch.cuda.synchronize()
    times = []
    i = 0
    while len(times) < runs:
        events = []
        for _ in range(25):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn(*copies[i % len(copies)])
            e.record()
            events.append((s, e))
            i += 1
        torch.cuda.synchronize()
        times.extend(1000.0 * s.elapsed_time(e) for s, e in events)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, len(times) * 95 // 100)]


def make_inputs(b, gamma, v, kind, gen):
    z_p = torch.randn(b, gamma + 1, v, device="cuda", generator=gen) * 3.0
    z_q = z_p[:, :gamma] + torch.randn(b, gamma, v, device="cuda", generator=gen)
    q = torch.softmax(z_q, -1)
    draft = torch.multinomial(q.reshape(-1, v), 1).reshape(b, gamma)
    u = torch.rand(b, gamma, device="cuda", generator=gen).clamp_min(1e-7)
    if kind == "logits":
        return z_p, z_q, draft, u
    return torch.softmax(z_p, -1), q, draft, u


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default="sampling_torch.csv")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("sampling_torch_baseline: no CUDA device; nothing measured (skip)")
        return 0
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    runs = max(200, args.runs)
    batch_sizes = [1, 8] if args.quick else [1, 8, 32, 128]
    gammas = [8] if args.quick else [4, 8]
    vocabs = [151936] if args.quick else [32000, 128256, 151936]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(2026)
    rows = []
    for kind in ("probabilities", "logits"):
        for v in vocabs:
            for gamma in gammas:
                for b in batch_sizes:
                    base = make_inputs(b, gamma, v, kind, gen)
                    nbytes = sum(t.numel() * t.element_size() for t in base[:2])
                    n = max(1, min(MAX_COPIES, -(-L2_ROTATION_BYTES // nbytes)))
                    copies = [base] + [tuple(t.clone() for t in base) for _ in range(n - 1)]
                    for name, fn in (("torch_full", torch_full), ("torch_gather", torch_gather)):
                        run = with_softmax(fn, 1.0) if kind == "logits" else fn
                        med, p95 = time_it(run, copies, runs)
                        rows.append((kind, name, b, gamma, v, n, med, p95))
                        print(f"{kind:13s} {name:12s} B={b:<3d} gamma={gamma} V={v:<6d} copies={n:<2d} "
                              f"median {med:9.2f} us p95 {p95:9.2f} us", flush=True)
                    del copies, base
                    torch.cuda.empty_cache()
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "path", "b", "gamma", "vocab", "copies", "median_us", "p95_us"])
        for r in rows:
            w.writerow([r[0], r[1], r[2], r[3], r[4], r[5], f"{r[6]:.3f}", f"{r[7]:.3f}"])
    print(f"wrote {args.csv} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
