#!/usr/bin/env python3
"""Side-by-side speed of our engine and llama.cpp's llama-bench on the same
GGUF files and thread count, runs alternating (ours, theirs, ours, ...) so
that load on a shared machine hits both alike.

    compare.py --ours build/bin/bench --llama-bench /path/to/llama-bench \
               [-t 2] [-p 128] [-n 32] [--rounds 3] MODEL.gguf ...

llama.cpp is not part of this repository: build it yourself in a scratch
folder and pass its llama-bench. Prints one Markdown table with mean ± sd
tokens/s over the rounds and the ratio ours / llama.cpp.
"""
import argparse
import json
import os
import statistics
import subprocess


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out[out.index("["):])


def side_by_side(ours_cmd, llama_bench, model, t, p, n, rounds, llama_args="", env=None):
    """Alternating runs of both on one model: {"pp": ([ours], [theirs]), "tg": (...)}
    tokens/s per round. env: the environment of both (e.g. an ISA cap)."""
    res = {"pp": ([], []), "tg": ([], [])}
    for _ in range(rounds):
        for r in run_json([ours_cmd, model, "-t", str(t), "-p", str(p), "-n", str(n),
                           "-r", "1", "-o", "json"], env):
            res["pp" if r["n_prompt"] else "tg"][0].append(r["avg_ts"])
        for r in run_json([llama_bench, "-m", model, "-t", str(t), "-p", str(p),
                           "-n", str(n), "-r", "1", "-o", "json"] + llama_args.split(), env):
            res["pp" if r["n_prompt"] else "tg"][1].append(r["avg_ts"])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-args", default="", help="extra llama-bench arguments, e.g. '--poll 0'")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()

    rows = []
    for model in a.models:
        res = side_by_side(a.ours, a.llama_bench, model, a.t, a.p, a.n, a.rounds, a.llama_args)
        for test, n in (("pp", a.p), ("tg", a.n)):
            o, t = res[test]
            if not o or not t:  # -p 0 or -n 0
                continue
            sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
            rows.append((os.path.basename(model), f"{test}{n}",
                         f"{statistics.mean(o):.2f} ± {sd(o):.2f}",
                         f"{statistics.mean(t):.2f} ± {sd(t):.2f}",
                         f"{statistics.mean(o) / statistics.mean(t):.2f}"))
            print(rows[-1], flush=True)
    print(f"\n| model | test | ours t/s | llama.cpp t/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
