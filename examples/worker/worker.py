#!/usr/bin/env python3
"""The example speculative-decoding worker (issue #18): trains (or loads) a
target and a draft model (tinylm.py), decodes with speculation verified by a
specverify server (spec_decode.py), checks that greedy speculation is
lossless and that sampled speculation emits the target's distribution, and
reports acceptance, tokens per second with and without speculation, and where
the time went. See README.md.

    worker.py --server build/server/specverify-server --check-greedy --check-sampled 2000 --bench
    worker.py --address 127.0.0.1:50051 --device cuda --transport cuda --preset full --bench
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import spec_decode  # noqa: E402
import tinylm  # noqa: E402

import specverify  # noqa: E402  (build/client/python on PYTHONPATH)

PROMPTS = [
    "This License ",
    "the Program, ",
    "  5. Conveying Modified Source Versions.\n\n  You may ",
    "GNU GENERAL PUBLIC LICENSE\n",
]

# Launches the server so that it dies with this process even on SIGKILL
# (prctl(PR_SET_PDEATHSIG) survives execv; the parent check closes the race).
_LAUNCHER = r"""
import ctypes, os, signal, sys
if ctypes.CDLL(None).prctl(1, signal.SIGKILL) != 0 or os.getppid() != int(sys.argv[1]):
    os._exit(125)
os.execv(sys.argv[2], sys.argv[2:])
"""


def start_server(binary, flags):
    args = [binary, "--listen_address=127.0.0.1:0", "--metrics_address=", *flags]
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    if not line.startswith("listening on port "):
        proc.kill()
        raise RuntimeError(f"server did not start (stdout {line!r})")
    return proc, f"127.0.0.1:{int(line.split()[-1])}"


def chi2_critical(df, z=3.0902):
    """Chi-square quantile by Wilson-Hilferty (z = 3.0902: p = 0.001);
    within 1% of the exact value for df >= 3."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def check_greedy(target, draft, verifier, args, corpus, log):
    """Speculative greedy == the target's own greedy decode, token for token."""
    failures = []
    rows = []
    for prompt_text in args.prompts:
        prompt = corpus.encode(prompt_text)
        expected, _ = spec_decode.target_decode(target, prompt, args.tokens, device=args.device)
        for gamma in args.gamma:
            dec = spec_decode.SpeculativeDecoder(target, draft, verifier, gamma, "greedy",
                                                 transport=args.transport, device=args.device)
            try:
                got = dec.generate(prompt, args.tokens)
            finally:
                dec.close()
            same = got.tokens == expected
            # The committed draft KV against a recomputation (see
            # SpeculativeDecoder.draft_cache_error); float64 rounding only.
            kv_error = dec.draft_cache_error(got.state)
            kv_ok = kv_error < args.kv_tolerance
            first = next((i for i, (a, b) in enumerate(zip(got.tokens, expected)) if a != b),
                         None)
            rows.append({"prompt": prompt_text, "gamma": gamma, "identical": same,
                         "first_difference": first, "draft_kv_max_error": kv_error,
                         "acceptance": got.accepted / max(1, got.proposed)})
            log(f"greedy gamma={gamma} prompt={prompt_text!r}: "
                f"{'identical' if same else f'DIFFERS at {first}'} "
                f"({got.accepted}/{got.proposed} accepted), committed draft KV "
                f"{'matches' if kv_ok else 'DIFFERS'} (max error {kv_error:.1e}) -> "
                f"{corpus.decode(got.tokens)!r}")
            if not same or not kv_ok:
                failures.append((prompt_text, gamma, first, kv_error))
    return rows, failures


def check_sampled(target, draft, verifier, args, corpus, log):
    """The first token emitted by speculative sampling, over many independent
    runs, against the target's own distribution: Pearson chi-square with the
    cells of expected count < 5 merged."""
    prompt_text = args.sampled_prompt
    prompt = corpus.encode(prompt_text)
    gamma = args.gamma[0]
    p = spec_decode.target_distribution(target, prompt, args.temperature)
    dec = spec_decode.SpeculativeDecoder(target, draft, verifier, gamma, "sampled",
                                         temperature=args.temperature, transport=args.transport,
                                         device=args.device)
    counts = np.zeros(len(p), np.int64)
    accepted = 0
    try:
        base = dec.prefill(prompt, len(prompt) + gamma + 3)
        for run in range(args.check_sampled):
            out = dec.generate(prompt, 1, seed=run + 1, state=base.clone())
            counts[out.tokens[0]] += 1
            accepted += out.accepted
    finally:
        dec.close()
    n = counts.sum()
    expected = n * p
    big = expected >= 5
    cells_obs = list(counts[big]) + [counts[~big].sum()]
    cells_exp = list(expected[big]) + [expected[~big].sum()]
    if cells_exp[-1] < 5:  # too little mass left over to be a cell of its own
        cells_obs[-2] += cells_obs.pop()
        cells_exp[-2] += cells_exp.pop()
    cells_obs, cells_exp = np.array(cells_obs, float), np.array(cells_exp, float)
    statistic = float(((cells_obs - cells_exp) ** 2 / cells_exp).sum())
    df = len(cells_obs) - 1
    critical = chi2_critical(df) if df >= 1 else float("nan")
    ok = df >= 2 and statistic < critical
    log(f"sampled gamma={gamma} T={args.temperature} prompt={prompt_text!r}: {n} runs, "
        f"{len(cells_obs)} cells, chi2 {statistic:.2f} vs {critical:.2f} (p=0.001) -> "
        f"{'consistent' if ok else 'NOT CONSISTENT'}; first-round acceptance "
        f"{accepted / (n * gamma):.2f}")
    top = np.argsort(-p)[:5]
    log("  top target tokens: " + ", ".join(
        f"{corpus.decode([t])!r} p={p[t]:.3f} seen={counts[t] / n:.3f}" for t in top))
    return {"prompt": prompt_text, "gamma": gamma, "runs": int(n), "cells": len(cells_obs),
            "chi2": statistic, "critical_p001": critical, "consistent": ok}, ok


def bench(target, draft, verifier, args, corpus, log):
    """Tokens per second with and without speculation, acceptance, and the
    time split, per mode and gamma, over the prompts."""
    rows = []
    for mode in args.modes:
        base_tokens, base_seconds = 0, 0.0
        for i, prompt_text in enumerate(args.prompts):
            prompt = corpus.encode(prompt_text)
            spec_decode.target_decode(target, prompt, 8, mode, args.temperature, i,
                                      args.device)  # warm-up
            toks, seconds = spec_decode.target_decode(target, prompt, args.tokens, mode,
                                                      args.temperature, i, args.device)
            base_tokens += len(toks)
            base_seconds += seconds
        base_tps = base_tokens / base_seconds
        for gamma in args.gamma:
            dec = spec_decode.SpeculativeDecoder(target, draft, verifier, gamma, mode,
                                                 args.temperature, args.transport, args.device)
            total = spec_decode.Timings()
            tokens = rounds = proposed = accepted = 0
            try:
                dec.generate(corpus.encode(args.prompts[0]), 8)  # warm-up
                for i, prompt_text in enumerate(args.prompts):
                    out = dec.generate(corpus.encode(prompt_text), args.tokens, seed=i + 1)
                    total.add(out.timings)
                    tokens += len(out.tokens)
                    rounds += out.rounds
                    proposed += out.proposed
                    accepted += out.accepted
            finally:
                dec.close()
            t = total
            row = {
                "mode": mode, "gamma": gamma, "transport": args.transport,
                "device": args.device, "tokens": tokens, "rounds": rounds,
                "acceptance": accepted / proposed,
                "tokens_per_round": tokens / rounds,
                "spec_tokens_per_s": tokens / t.total,
                "target_only_tokens_per_s": base_tps,
                "speedup": tokens / t.total / base_tps,
                "draft_ms_per_round": 1e3 * t.draft / rounds,
                "target_ms_per_round": 1e3 * t.target / rounds,
                "verify_ms_per_round": 1e3 * t.verify / rounds,
                "server_ms_per_round": 1e3 * t.server / rounds,
                "commit_ms_per_round": 1e3 * t.commit / rounds,
                "share_verify": t.verify / t.total,
                "share_forward": (t.draft + t.target) / t.total,
            }
            rows.append(row)
            log(f"bench {mode} gamma={gamma}: acceptance {row['acceptance']:.2f}, "
                f"{row['spec_tokens_per_s']:.0f} tok/s vs {base_tps:.0f} target-only "
                f"(x{row['speedup']:.2f}); per round draft {row['draft_ms_per_round']:.2f} ms, "
                f"target {row['target_ms_per_round']:.2f} ms, verify "
                f"{row['verify_ms_per_round']:.3f} ms (server {row['server_ms_per_round']:.3f}), "
                f"commit {row['commit_ms_per_round']:.3f} ms")
    return rows


def markdown(rows):
    lines = ["| mode | γ | transport | device | acceptance | tok/round | spec tok/s | "
             "target-only tok/s | speedup | draft ms/round | target ms/round | "
             "verify ms/round (server) | verify share | forward share |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['gamma']} | {r['transport']} | {r['device']} | "
            f"{r['acceptance']:.2f} | {r['tokens_per_round']:.2f} | "
            f"{r['spec_tokens_per_s']:.0f} | {r['target_only_tokens_per_s']:.0f} | "
            f"{r['speedup']:.2f} | {r['draft_ms_per_round']:.2f} | "
            f"{r['target_ms_per_round']:.2f} | {r['verify_ms_per_round']:.3f} "
            f"({r['server_ms_per_round']:.3f}) | {r['share_verify']:.0%} | "
            f"{r['share_forward']:.0%} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--address", help="a running specverify server: host:port, or unix:PATH on this host")
    where.add_argument("--server", help="a specverify-server binary to start on loopback")
    ap.add_argument("--server-flag", action="append", default=[],
                    help="extra flag for --server (repeatable), e.g. --server-flag=--device=cpu")
    ap.add_argument("--preset", choices=sorted(tinylm.PRESETS), default="ci")
    ap.add_argument("--device", default="cpu", help="torch device of the models: cpu or cuda")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                    help="model precision while decoding (float64 rules out near-tie argmax "
                         "flips between one-token and γ+1-token forward passes)")
    ap.add_argument("--transport", choices=["inline", "shm", "cuda"], default="inline")
    ap.add_argument("--gamma", default="1,3,5", help="comma-separated draft lengths")
    ap.add_argument("--tokens", type=int, default=48, help="new tokens per prompt")
    ap.add_argument("--prompts", nargs="*", default=PROMPTS)
    ap.add_argument("--modes", default="greedy,sampled")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--check-greedy", action="store_true")
    ap.add_argument("--kv-tolerance", type=float, default=None,
                    help="largest difference between the committed draft KV and a "
                         "recomputation (default 1e-9 in float64, 1e-3 in float32)")
    ap.add_argument("--check-sampled", type=int, default=0, metavar="RUNS")
    ap.add_argument("--sampled-prompt", default="the ")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("--train-device", default=None, help="default: --device")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--markdown", help="write the benchmark table here")
    args = ap.parse_args()
    args.gamma = [int(g) for g in args.gamma.split(",")]
    args.modes = args.modes.split(",")
    if args.kv_tolerance is None:
        args.kv_tolerance = 1e-9 if args.dtype == "float64" else 1e-3
    if args.threads:
        torch.set_num_threads(args.threads)

    def log(msg):
        print(msg, flush=True)

    corpus = tinylm.Corpus()
    preset = tinylm.PRESETS[args.preset]
    train_device = args.train_device or args.device
    report = {"preset": args.preset, "device": args.device, "transport": args.transport,
              "torch": torch.__version__, "corpus": tinylm.CORPUS, "vocab": corpus.vocab}
    models = {}
    for name in ("target", "draft"):
        shape, tc = preset[name]
        model, info = tinylm.load_or_train(name, shape, tc, corpus, log, train_device)
        models[name] = model.to(device=args.device, dtype=getattr(torch, args.dtype))
        report[name] = {"shape": shape, "steps": tc.steps, **info}
    target, draft = models["target"], models["draft"]

    server = None
    address = args.address
    if args.server:
        server, address = start_server(args.server, args.server_flag)
    status = 0
    try:
        with specverify.Verifier(address) as verifier:
            verifier.wait_until_serving(30)
            info = verifier.server_info()
            report["server"] = {"backend": info.backend, "device": info.device_name,
                                "version": info.version}
            log(f"server {address}: {info.backend} ({info.device_name}), transport "
                f"{args.transport}, models on {args.device} in {args.dtype}")
            if args.check_greedy:
                rows, failures = check_greedy(target, draft, verifier, args, corpus, log)
                report["greedy_check"] = rows
                if failures:
                    status = 1
            if args.check_sampled:
                row, ok = check_sampled(target, draft, verifier, args, corpus, log)
                report["sampled_check"] = row
                if not ok:
                    status = 1
            if args.bench:
                rows = bench(target, draft, verifier, args, corpus, log)
                report["bench"] = rows
                table = markdown(rows)
                log(table)
                if args.markdown:
                    with open(args.markdown, "w") as f:
                        f.write(table + "\n")
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    log("worker: " + ("every check passed" if status == 0 else "A CHECK FAILED"))
    return status


if __name__ == "__main__":
    sys.exit(main())
