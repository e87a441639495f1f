#!/usr/bin/env python3
"""Joins tree_bench's CSV with tree_torch_baseline's into one table and the
issue #14 target verdicts (H100):
  * greedy verify+pack, B=32, 64 nodes, 4 KiB rows: <= 8 us and >= 30x PyTorch;
  * exact tree sampling, B=8, 64 nodes, V=151,936 fp32: within 2x of the read
    floor of the rows it reads plus one launch (floor = a device-to-device
    copy of those bytes + an empty launch, measured in the same run).

Usage: tree_report.py --cuda tree_bench.csv --torch tree_torch.csv
"""
import argparse
import csv
import sys


def load(path):
    rows = {}
    try:
        with open(path) as f:
            for r in csv.DictReader(f):
                rows[(r["kind"], int(r["B"]), int(r["nodes"]), r["draft"])] = r
    except OSError as e:
        print(f"(cannot read {path}: {e})")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", required=True)
    ap.add_argument("--torch", required=True)
    args = ap.parse_args()
    cuda = load(args.cuda)
    torch = load(args.torch)
    print("Times in us; 'pair' = one launch between two events, 'b2b' = mean per launch of 25 queued back to "
          "back; floor = D2D copy of the bytes touched + an empty launch, timed the same way; PyTorch: median per "
          "call (events around each call).")
    print()
    print("| kind | B | nodes | draft rows | depth | pair | p95 | b2b | floor pair | floor b2b | b2b / floor b2b "
          "| PyTorch | speedup (PyTorch / b2b) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for key in sorted(cuda, key=lambda k: (k[0], k[3], k[2], k[1])):
        kind, b, n, draft = key
        if kind == "empty_launch":
            continue
        r = cuda[key]
        pair = float(r["median_us"])
        b2b = float(r["b2b_us"])
        floor_pair = float(r["copy_us"]) + float(r["launch_us"])
        floor_b2b = float(r["copy_b2b_us"]) + float(r["launch_b2b_us"])
        tkind = "torch_greedy" if kind.startswith("cuda_greedy") else "torch_sample"
        t = torch.get((tkind, b, n, draft))
        tmed = float(t["median_us"]) if t else None
        speed = f"{tmed / b2b:.1f}x" if tmed else "-"
        print(f"| {kind} | {b} | {n} | {draft} | {float(r['mean_depth']):.2f} | {pair:.2f} | {float(r['p95_us']):.2f} | "
              f"{b2b:.2f} | {floor_pair:.2f} | {floor_b2b:.2f} | {b2b / floor_b2b:.2f} | "
              f"{f'{tmed:.1f}' if tmed else '-'} | {speed} |")
        if kind == "cuda_greedy" and b == 32 and n == 64:
            ok = b2b <= 8.0 and tmed is not None and tmed / b2b >= 30.0
            verdicts.append(f"greedy verify+pack B=32 n=64 4KiB: {b2b:.2f} us back to back ({pair:.2f} per event pair;"
                            f" target <= 8), {(tmed / b2b) if tmed else float('nan'):.1f}x PyTorch (target >= 30x): "
                            f"{'MET' if ok else 'NOT MET'}")
        if kind == "cuda_sample" and b == 8 and n == 64:
            ok = b2b <= 2.0 * floor_b2b
            verdicts.append(f"sampled B=8 n=64 V=151936 draft rows={draft}: {b2b:.2f} us back to back vs floor "
                            f"{floor_b2b:.2f} ({b2b / floor_b2b:.2f}x; per event pair {pair:.2f} vs {floor_pair:.2f} ="
                            f" {pair / floor_pair:.2f}x), target <= 2x: {'MET' if ok else 'NOT MET'}")
    print()
    for v in verdicts:
        print("* " + v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
