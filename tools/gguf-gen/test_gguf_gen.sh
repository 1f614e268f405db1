#!/bin/sh
# gguf-gen end to end: generated models read back with the expected shapes,
# types, parameter counts and tokenizer; output is deterministic per seed.
# usage: test_gguf_gen.sh GGUF_GEN GGUF_DUMP SOURCE_DIR
set -eu
gen=$1 dump=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Tiny llama, Q4_K_M mix: K-quants, Q6_K for the tied embedding and for
# attn_v / ffn_down of the use_more_bits layers, F32 norms.
"$gen" --preset tiny --type q4_K_M --seed 5 --quiet -o "$tmp/a.gguf"
"$dump" "$tmp/a.gguf" > "$tmp/a.txt"
grep -q 'quantization Q4_K_M' "$tmp/a.txt" || fail "q4_K_M label"
grep -q 'Q6_K .* token_embd.weight' "$tmp/a.txt" || fail "token_embd Q6_K"
grep -q 'Q4_K .* blk.0.attn_q.weight' "$tmp/a.txt" || fail "attn_q Q4_K"
grep -q 'Q4_K .* blk.0.attn_v.weight' "$tmp/a.txt" || fail "attn_v 0 Q4_K"
grep -q 'Q6_K .* blk.1.attn_v.weight' "$tmp/a.txt" || fail "attn_v 1 Q6_K"
grep -q 'F32 .* blk.1.ffn_norm.weight' "$tmp/a.txt" || fail "norm F32"
grep -q '1312000 parameters (1.31M)' "$tmp/a.txt" || fail "param count"

# Deterministic: same seed, same bytes; another seed, other bytes.
"$gen" --preset tiny --type q4_K_M --seed 5 --quiet -o "$tmp/b.gguf"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || fail "not deterministic"
"$gen" --preset tiny --type q4_K_M --seed 6 --quiet -o "$tmp/c.gguf"
cmp -s "$tmp/a.gguf" "$tmp/c.gguf" && fail "seed ignored"

# Every mix we can write reads back.
for t in f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K_S q3_K_M q3_K_L q4_K_S q5_K_S q5_K_M q6_K; do
    "$gen" --preset tiny-qwen2 --n-layer 1 --n-ff 256 --n-vocab 300 --type $t --quiet -o "$tmp/t.gguf"
    "$dump" "$tmp/t.gguf" > "$tmp/t.txt" || fail "dump $t"
    grep -q "blk.0.attn_q.bias" "$tmp/t.txt" || fail "qwen2 bias $t"
done

# Random-block types (no quantizer: i-quants, ternary): block matrices in
# the type, token_embd Q4_K, norms F32, the file type named as Ollama does.
for t in iq1_s iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq4_nl iq4_xs tq1_0 tq2_0; do
    "$gen" --preset tiny --type $t --seed 3 --quiet -o "$tmp/i.gguf"
    "$dump" "$tmp/i.gguf" > "$tmp/i.txt" || fail "dump $t"
    T=$(echo $t | tr a-z A-Z)
    grep -q "quantization $T\$" "$tmp/i.txt" || fail "$t label"
    grep -q "$T .* blk.1.ffn_down.weight" "$tmp/i.txt" || fail "$t ffn_down"
    grep -q 'Q4_K .* token_embd.weight' "$tmp/i.txt" || fail "$t token_embd"
    grep -q 'F32 .* blk.0.attn_norm.weight' "$tmp/i.txt" || fail "$t norm"
done
"$gen" --preset tiny --type iq4_xs --seed 3 --quiet -o "$tmp/j.gguf"
cmp -s "$tmp/i.gguf" "$tmp/j.gguf" && fail "iq seed/type ignored"
"$gen" --preset tiny --type iq1_m -o "$tmp/x.gguf" 2>/dev/null && fail "iq1_m accepted"

# Custom shape, vocabulary copied from a vocab GGUF.
vocab="$src/../shared/fixtures/vocab/ggml-vocab-llama-spm.gguf"
[ -f "$vocab" ] || vocab="$src/tests/fixtures/vocab/ggml-vocab-llama-spm.gguf"
if [ -f "$vocab" ]; then
    "$gen" --arch llama --n-embd 128 --n-layer 1 --n-head 2 --n-ff 256 --type q8_0 \
        --vocab "$vocab" --quiet -o "$tmp/v.gguf"
    "$dump" "$tmp/v.gguf" > "$tmp/v.txt"
    grep -q 'tokenizer.ggml.tokens = \["<unk>", "<s>", "</s>"' "$tmp/v.txt" || fail "vocab copy"
    grep -q '128 x 32000 .*token_embd.weight' "$tmp/v.txt" || fail "vocab size"
fi

# Encoders with the BERT vocabulary.
bvocab="$src/../shared/fixtures/vocab/ggml-vocab-bert-bge.gguf"
[ -f "$bvocab" ] || bvocab="$src/tests/fixtures/vocab/ggml-vocab-bert-bge.gguf"
if [ -f "$bvocab" ]; then
    "$gen" --preset tiny-bert --vocab "$bvocab" --type q8_0 --quiet -o "$tmp/b.gguf"
    "$dump" "$tmp/b.gguf" > "$tmp/b.txt"
    grep -q 'F32 .* position_embd.weight' "$tmp/b.txt" || fail "bert position_embd"
    grep -q 'bert.attention.causal = false' "$tmp/b.txt" || fail "bert causal"
    "$gen" --preset tiny-nomic-bert --vocab "$bvocab" --type f16 --quiet -o "$tmp/n.gguf"
    "$dump" "$tmp/n.gguf" | grep -q 'F16 .* blk.1.attn_qkv.weight' || fail "nomic qkv"
fi
"$gen" --preset tiny-bert -o "$tmp/x.gguf" 2>/dev/null && fail "bert without vocab accepted"

# The newer families: their own tensors and keys.
"$gen" --preset tiny-phi3 --quiet -o "$tmp/p.gguf"
"$dump" "$tmp/p.gguf" > "$tmp/p.txt"
grep -q 'blk.1.attn_qkv.weight' "$tmp/p.txt" || fail "phi3 fused qkv"
grep -q 'rope_factors_long.weight' "$tmp/p.txt" || fail "phi3 longrope"
grep -q 'phi3.rope.dimension_count = 12' "$tmp/p.txt" || fail "phi3 partial rotary"
"$gen" --preset tiny-gemma2 --quiet -o "$tmp/g.gguf"
"$dump" "$tmp/g.gguf" > "$tmp/g.txt"
grep -q 'blk.0.post_ffw_norm.weight' "$tmp/g.txt" || fail "gemma2 post norms"
grep -q 'gemma2.attn_logit_softcapping = 50' "$tmp/g.txt" || fail "gemma2 softcap"
"$gen" --preset gemma3-4b --sparse --quiet -o "$tmp/s.gguf"
"$dump" "$tmp/s.gguf" > "$tmp/s.txt"
grep -q 'gemma3.rope.scaling.factor = 8' "$tmp/s.txt" || fail "gemma3 scaling"
grep -q 'gemma3.attention.sliding_window = 1024' "$tmp/s.txt" || fail "gemma3 window"
grep -q 'blk.33.attn_k_norm.weight' "$tmp/s.txt" || fail "gemma3 k norm"
"$gen" --preset qwen3-8b --sparse --quiet -o "$tmp/s.gguf"
"$dump" "$tmp/s.gguf" | grep -q '4096 x 151936 .*output.weight' || fail "qwen3-8b untied"

# Sparse: full length, header readable.
"$gen" --preset tiny --type f16 --sparse --quiet -o "$tmp/s.gguf"
"$dump" "$tmp/s.gguf" > /dev/null || fail "sparse dump"

# --confident: deterministic, untied, and refused where it cannot apply (the
# runner's test_spec shows its Q4_0 draft is accepted).
"$gen" --preset tiny --untied --confident 2 --seed 4 --quiet -o "$tmp/k.gguf"
"$gen" --preset tiny --untied --confident 2 --seed 4 --quiet -o "$tmp/l.gguf"
cmp -s "$tmp/k.gguf" "$tmp/l.gguf" || fail "--confident not deterministic"
"$dump" "$tmp/k.gguf" | grep -q 'output.weight' || fail "--confident output"
"$gen" --preset tiny --confident 2 -o "$tmp/x.gguf" 2>/dev/null && fail "--confident tied accepted"
"$gen" --preset tiny --untied --confident 0 -o "$tmp/x.gguf" 2>/dev/null && fail "--confident 0 accepted"
"$gen" --preset tiny --untied --confident 2 --random-blocks -o "$tmp/x.gguf" 2>/dev/null &&
    fail "--confident --random-blocks accepted"

# Bad arguments fail cleanly.
"$gen" --preset nope -o "$tmp/x.gguf" 2>/dev/null && fail "bad preset accepted"
"$gen" --preset tiny --type q9_9 -o "$tmp/x.gguf" 2>/dev/null && fail "bad type accepted"
"$dump" "$src/tests/fixtures/quant/Q4_0.blocks" 2>/dev/null && fail "dump of a non-GGUF"
echo ok
