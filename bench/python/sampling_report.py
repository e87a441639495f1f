#!/usr/bin/env python3
"""Joins rejection_bench.csv (CUDA) and sampling_torch.csv (PyTorch) into the
markdown table of docs/PERFORMANCE.md's "Rejection sampling (issue #8)"
section: ours, the read floor, the launch floor, both PyTorch variants and the
speedups, one row per (kind, B, gamma, V).

Usage: sampling_report.py --cuda rejection_bench.csv --torch sampling_torch.csv
"""
import argparse
import csv
import sys


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--torch", required=True)
    args = ap.parse_args()
    cuda = load(args.cuda)
    torch_rows = load(args.torch)
    key = lambda r: (r["kind"], int(r["b"]), int(r["gamma"]), int(r["vocab"]))
    by = {}
    for r in cuda:
        by.setdefault(key(r), {})[r["path"]] = r
    for r in torch_rows:
        by.setdefault(key(r), {})[r["path"]] = r
    empty = next((r for r in cuda if r["path"] == "empty_kernel"), None)
    if empty:
        print(f"Empty kernel launch: median {float(empty['median_us']):.2f} us, p95 {float(empty['p95_us']):.2f} us.\n")
    print("| kind | B | γ | V | ours median (p95) µs | read floor µs (MB) | torch_full µs | torch_gather µs "
          "| vs full | vs gather | ours / floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(by):
        if k[1] == 0:
            continue
        row = by[k]
        ours = row.get("cuda_rejection")
        if ours is None:
            continue
        o = float(ours["median_us"])
        floor = row.get("read_floor")
        fl = float(floor["median_us"]) if floor else float("nan")
        mb = int(ours["floor_bytes"]) / 1e6
        tf = float(row["torch_full"]["median_us"]) if "torch_full" in row else None
        tg = float(row["torch_gather"]["median_us"]) if "torch_gather" in row else None
        us = lambda t: "—" if t is None else f"{t:.1f}"
        ratio = lambda t: "—" if t is None else f"{t / o:.1f}×"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.2f} ({float(ours['p95_us']):.2f}) | {fl:.2f} ({mb:.1f}) "
              f"| {us(tf)} | {us(tg)} | {ratio(tf)} | {ratio(tg)} | {o / fl:.2f} |")
    extras = [r for r in cuda if r["path"] not in ("cuda_rejection", "read_floor", "empty_kernel")]
    if extras:
        print("\n| option | kind | B | γ | V | median (p95) µs | vs plain |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in extras:
            plain = by.get(key(r), {}).get("cuda_rejection")
            ratio = float(r["median_us"]) / float(plain["median_us"]) if plain else float("nan")
            print(f"| {r['path']} | {r['kind']} | {r['b']} | {r['gamma']} | {r['vocab']} | "
                  f"{float(r['median_us']):.2f} ({float(r['p95_us']):.2f}) | {ratio:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
