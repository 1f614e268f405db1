#!/usr/bin/env python3
"""The weight-type table: our engine against llama.cpp's llama-bench for every
weight type the engine supports, on one model shape (random weights from
tools/gguf-gen), prompt (pp) and generation (tg), on the AVX-512 path and on
the AVX2 path, in one run. Prints one Markdown table of ratios ours /
llama.cpp (>1: we are faster) with the t/s behind them.

    types.py --ours build/bin/bench --gguf-gen build/bin/gguf-gen \\
             --llama-bench /path/llama-bench [--llama-bench-avx2 /path/llama-bench] \\
             [--dir /tmp/types] [--preset llama-3.2-1b] [-t 2] [-p 512] [-n 32] \\
             [--rounds 2] [--types f16,bf16,...] [--columns avx512,avx2]

The AVX2 column runs ours with OLLAMA_KERNELS_ISA=avx2 against a llama.cpp
built without AVX-512 (-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF ...);
without --llama-bench-avx2 only the AVX-512 (native) column is measured.
Model files are generated into --dir once (missing ones only) and kept. Runs
alternate (ours, theirs, ours, ...) through compare.py so that load on a
shared machine falls on both alike; read the ratios, not the t/s. A cell is
the median of the per-round ratios (ours / llama.cpp of the same round) with
their min-max range, then the median t/s of each side. The quantized files
are random valid blocks (gguf-gen --random-blocks: no kernel's speed depends
on the values), minutes less to write than quantizing.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

# Every weight type of the engine, as gguf-gen --type names (the k-quants as
# the mixes llama-quantize makes; the i-quants, ternary and MXFP4 files have
# every block matrix in that type, token_embd Q4_K and output Q6_K).
TYPES = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
         "q2_K", "q3_K_M", "q4_K_M", "q5_K_M", "q6_K",
         "iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs",
         "tq1_0", "tq2_0", "mxfp4_moe"]


def model_file(a, typ):
    path = os.path.join(a.dir, f"{a.preset}-{typ}.gguf")
    if not os.path.exists(path):
        os.makedirs(a.dir, exist_ok=True)
        tmp = path + ".tmp"
        blocks = [] if typ in ("f32", "f16", "bf16") else ["--random-blocks"]
        subprocess.run([a.gguf_gen, "--preset", a.preset, "--type", typ, "--quiet", *blocks,
                        "-o", tmp], check=True)
        os.replace(tmp, path)
    return path


def ratio_cell(res, test):
    o, t = res[test]
    if not o or not t:
        return "n/a"
    r = [a / b for a, b in zip(o, t)]
    mo, mt = statistics.median(o), statistics.median(t)
    return f"**{statistics.median(r):.2f}** ({min(r):.2f}-{max(r):.2f}; {mo:.1f} / {mt:.1f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--gguf-gen", required=True)
    ap.add_argument("--llama-bench", required=True, help="native (AVX-512) build")
    ap.add_argument("--llama-bench-avx2", help="build without AVX-512: the AVX2 column")
    ap.add_argument("--dir", default="/tmp/types")
    ap.add_argument("--preset", default="llama-3.2-1b")
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--llama-args", default="")
    ap.add_argument("--columns", default="avx512,avx2",
                    help="which ISA columns to measure (avx2 needs --llama-bench-avx2)")
    a = ap.parse_args()

    want = a.columns.split(",")
    columns = [("avx512", a.llama_bench, None)] if "avx512" in want else []
    if a.llama_bench_avx2 and "avx2" in want:
        columns.append(("avx2", a.llama_bench_avx2, "avx2"))
    head = ["type"]
    for name, _, _ in columns:
        head += [f"pp{a.p} {name}", f"tg{a.n} {name}"]
    rows = []
    for typ in a.types.split(","):
        model = model_file(a, typ)
        row = [typ]
        for name, llama_bench, isa in columns:
            env = dict(os.environ)
            env.pop("OLLAMA_KERNELS_ISA", None)
            if isa:
                env["OLLAMA_KERNELS_ISA"] = isa
            try:
                res = compare.side_by_side(a.ours, llama_bench, model, a.t, a.p, a.n, a.rounds,
                                           a.llama_args, env)
                row += [ratio_cell(res, "pp"), ratio_cell(res, "tg")]
            except subprocess.CalledProcessError as e:
                print(f"{typ} {name}: {' '.join(e.cmd[:3])}... failed: {e.stderr[-300:]}",
                      file=sys.stderr)
                row += ["failed", "failed"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    print(f"\nratio ours / llama.cpp (ours t/s / llama.cpp t/s), {a.preset}, "
          f"{a.t} threads, {a.rounds} alternating rounds: median (min-max) of "
          f"the per-round ratios; median t/s\n")
    print("| " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * (len(head) - 1))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
