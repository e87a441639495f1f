#!/usr/bin/env python3
"""Vectorized PyTorch token-tree verification (issue #14 baseline), timed like
tree_bench: CUDA events around each call, >= 200 samples after 20 warm-ups,
median and p95, inputs rotated among up to 4 copies.

The same rules as kernels/tree (docs/TREES.md), vectorized over the batch
(no Python loop over trees); the loops run over tree levels (the shapes' max
depth, a static property of the tree buffers, as EAGLE/Medusa keep them)
and child ranks (at most 4 children per node), with no host sync inside:
  greedy   - per level: children of the current node (a [B, N+1, 4] child
             table), the lowest-index child whose token equals the target at
             the current node; then the accepted rows are gathered into the
             packed buffer at the exclusive prefix of the depths (boolean
             mask + index_select, as PyTorch eager packs).
  sampled  - per level and child rank: SpecInfer's test u * q(x) * Z <= R(x)
             against the residual R (a [B, V] tensor) and its mass Z; on a
             rejection R = relu(R - Z q_c) (draft rows) or R with x zeroed
             (no draft rows), Z = R.sum(); the emission samples the final
             residual (or p at a leaf) with torch.multinomial.
Rows: fp32 probabilities, V = 151,936; KV rows 4 KiB.

Usage: tree_torch_baseline.py [--csv out.csv] [--runs N] [--quick]
"""
import argparse
import csv
import random
import sys

import torch

WARMUP = 20
VOCAB = 151936
ROW_INTS = 1024  # 4 KiB rows


def random_tree(n, rng):
    """Parents of a random tree of n nodes, 1-4 children per node, BFS order."""
    parents = []
    frontier = [-1]
    head = 0
    while len(parents) < n:
        parent = frontier[head] if head < len(frontier) else len(parents) - 1
        head += 1
        for _ in range(rng.randint(1, 4)):
            if len(parents) >= n:
                break
            frontier.append(len(parents))
            parents.append(parent)
    return parents


def tree_tables(b, n, seed, device):
    rng = random.Random(seed)
    child = torch.full((b, n + 1, 4), -1, dtype=torch.int64)
    max_depth = 0
    for i in range(b):
        parents = random_tree(n, rng)
        depth = [0] * n
        counts = [0] * (n + 1)
        for j, p in enumerate(parents):
            child[i, p + 1, counts[p + 1]] = j
            counts[p + 1] += 1
            depth[j] = 1 if p < 0 else depth[p] + 1
        max_depth = max(max_depth, max(depth))
    tokens = torch.randint(0, VOCAB, (b, n), dtype=torch.int64)
    return child.to(device), tokens.to(device), max_depth


def greedy_verify_pack(child, tokens, targets, kv, max_depth):
    b = tokens.shape[0]
    n = tokens.shape[1]
    ar = torch.arange(b, device=tokens.device)
    cur = torch.zeros(b, dtype=torch.int64, device=tokens.device)  # node + 1
    alive = torch.ones(b, dtype=torch.bool, device=tokens.device)
    path = torch.full((b, max_depth), -1, dtype=torch.int64, device=tokens.device)
    for d in range(max_depth):
        c = child[ar, cur]                                   # [B, 4]
        tok = tokens.gather(1, c.clamp_min(0))
        want = targets.gather(1, cur.unsqueeze(1))
        match = (c >= 0) & (tok == want)
        has = match.any(1) & alive
        first = match.to(torch.int32).argmax(1)
        nxt = c.gather(1, first.unsqueeze(1).to(torch.int64)).squeeze(1)
        path[:, d] = torch.where(has, nxt, path[:, d])
        cur = torch.where(has, nxt + 1, cur)
        alive = has
    next_tokens = targets.gather(1, cur.unsqueeze(1)).squeeze(1)
    valid = path >= 0
    depth = valid.sum(1)
    offsets = torch.cumsum(depth, 0) - depth
    rows = (ar.unsqueeze(1) * n + path)[valid]               # tree-major, path order
    packed = kv.view(b * n, -1).index_select(0, rows)
    return depth, next_tokens, offsets, packed


def sampled_verify(child, tokens, p, q, max_depth, gen):
    b, n = tokens.shape
    dev = tokens.device
    ar = torch.arange(b, device=dev)
    cur = torch.zeros(b, dtype=torch.int64, device=dev)
    alive = torch.ones(b, dtype=torch.bool, device=dev)
    depth = torch.zeros(b, dtype=torch.int64, device=dev)
    final = torch.zeros(b, VOCAB, device=dev)
    for _ in range(max_depth + 1):
        r = p[ar, cur].clone()                               # [B, V]
        z = torch.ones(b, device=dev)
        accepted = torch.full((b,), -1, dtype=torch.int64, device=dev)
        for rank in range(4):
            c = child[ar, cur, rank]
            valid = alive & (c >= 0) & (accepted < 0)
            cc = c.clamp_min(0)
            x = tokens.gather(1, cc.unsqueeze(1))
            r_x = r.gather(1, x).squeeze(1)
            if q is not None:
                q_row = q[ar, cc]
                q_x = q_row.gather(1, x).squeeze(1)
            else:
                q_x = torch.ones(b, device=dev)
            u = torch.rand(b, device=dev, generator=gen)
            acc = valid & (r_x > 0) & (u * q_x * z <= r_x)
            accepted = torch.where(acc, c, accepted)
            rej = (valid & ~acc).unsqueeze(1)
            if q is not None:
                r = torch.where(rej, (r - z.unsqueeze(1) * q_row).clamp_min(0.0), r)
            else:
                r = torch.where(rej, r.scatter(1, x, 0.0), r)
            z = torch.where(rej.squeeze(1), r.sum(1), z)
        stop = alive & (accepted < 0)
        final = torch.where(stop.unsqueeze(1), r, final)
        depth = depth + (alive & (accepted >= 0)).to(torch.int64)
        cur = torch.where(alive & (accepted >= 0), accepted + 1, cur)
        alive = alive & (accepted >= 0)
    empty = final.sum(1, keepdim=True) <= 0
    final = torch.where(empty, p[ar, cur], final)
    next_tokens = torch.multinomial(final, 1, generator=gen).squeeze(1)
    return depth, next_tokens


def time_it(fn, copies, runs):
    for i in range(WARMUP):
        fn(*copies[i % len(copies)])
    torch.cuda.synchronize()
    times = []
    for i in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*copies[i % len(copies)])
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, len(times) * 95 // 100)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("tree_torch_baseline: no CUDA device; skipped")
        return 0
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    rows = []
    runs = 50 if args.quick else args.runs
    bs = [1, 8, 32, 128]
    print(f"{'kind':<16} {'B':>4} {'nodes':>6} {'draft':>5} {'median_us':>10} {'p95_us':>10}")
    for n in (16, 64, 256):
        for b in bs:
            copies = []
            for v in range(4):
                child, tokens, max_depth = tree_tables(b, n, 1000 * v + n + b, dev)
                targets = torch.randint(0, VOCAB, (b, n + 1), dtype=torch.int64, device=dev)
                # Make most children match: the target at a node is its first child's token.
                first_child_tok = tokens.gather(1, child[:, :, 0].clamp_min(0))
                targets = torch.where(torch.rand(b, n + 1, device=dev) < 0.7, first_child_tok, targets)
                kv = torch.randint(0, 1 << 30, (b, n, ROW_INTS), dtype=torch.int32, device=dev)
                copies.append((child, tokens, targets, kv, max_depth))
            med, p95 = time_it(greedy_verify_pack, copies, runs)
            print(f"{'torch_greedy':<16} {b:>4} {n:>6} {'-':>5} {med:>10.1f} {p95:>10.1f}")
            rows.append(["torch_greedy", b, n, "-", f"{med:.3f}", f"{p95:.3f}"])
            del copies
            if args.quick and n == 16:
                break
    free, _ = torch.cuda.mem_get_info()
    budget = int(free * 0.6)
    gen = torch.Generator(device=dev)
    gen.manual_seed(7)
    for draft in (True, False):
        for n in (16, 64, 256):
            for b in bs:
                row_bytes = VOCAB * 4
                set_bytes = (b * (n + 1) + (b * n if draft else 0)) * row_bytes
                # The vectorized code holds a few [B, V] temporaries beside the rows.
                if set_bytes + 8 * b * row_bytes > budget:
                    print(f"{'torch_sample':<16} {b:>4} {n:>6} {('yes' if draft else 'no'):>5} skipped: memory")
                    continue
                variants = max(1, min(4, budget // (set_bytes + 8 * b * row_bytes)))
                copies = []
                for v in range(variants):
                    child, tokens, max_depth = tree_tables(b, n, 77 * v + n + b, dev)
                    p = torch.rand(b, n + 1, VOCAB, device=dev)
                    p /= p.sum(-1, keepdim=True)
                    q = None
                    if draft:
                        q = torch.rand(b, n, VOCAB, device=dev)
                        q /= q.sum(-1, keepdim=True)
                    copies.append((child, tokens, p, q, max_depth, gen))
                # Large batches run ~10 ms a call: fewer samples keep the whole
                # GPU command within its budget (the median is stable there).
                med, p95 = time_it(sampled_verify, copies, runs if b <= 8 else max(50, runs // 4))
                d = "yes" if draft else "no"
                print(f"{'torch_sample':<16} {b:>4} {n:>6} {d:>5} {med:>10.1f} {p95:>10.1f}")
                rows.append(["torch_sample", b, n, d, f"{med:.3f}", f"{p95:.3f}"])
                del copies
                torch.cuda.empty_cache()
                if args.quick and b >= 8:
                    break
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kind", "B", "nodes", "draft", "median_us", "p95_us"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
