#!/bin/sh
# make-corpus.sh DIR - seed corpora for the fuzz targets, made by the
# project's own tools in bin/: DIR/stream, DIR/npy, DIR/model, DIR/attrs
# and DIR/argv.  The inputs are kept small (a 1-layer model with C = 8)
# so the fuzzers run fast; each target's first byte conventions are in
# its source (fuzz/fuzz_*.c).
set -eu
out=${1:-build/fuzz/corpus}
bin=$(cd "$(dirname "$0")/.." && pwd)/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in stream npy model attrs argv safetensors gpt2config llmc; do
	rm -rf "$out/$d"
	mkdir -p "$out/$d"
done
unset ANDREA_MODEL ANDREA_DEVICE ANDREA_THREADS ANDREA_ZLEVEL ANDREA_MAX_BYTES

# a tiny model (the train target's --steps 0 writes it without data)
m=$tmp/m.ats
"$bin/andrea-train" --steps 0 --layers 1 --heads 2 --d-model 8 --ctx 8 \
	--vocab 257 -o "$m"
"$bin/andrea-train" --steps 0 --layers 1 --heads 2 --d-model 8 --ctx 8 \
	--vocab 16 -z 0 -o "$tmp/m0.ats"

# every stage's output on a short text, at several levels
i=0
for z in 0 1 9; do
	e="$bin/andrea-embed -m $m -z $z"
	printf hi | $e --text >"$tmp/x$z.ats"
	"$bin/andrea-qkv" -m "$m" -z $z "$tmp/x$z.ats" >"$tmp/qkv$z.ats"
	"$bin/andrea-scores" -z $z "$tmp/qkv$z.ats" >"$tmp/s$z.ats"
	"$bin/andrea-mask" -z $z "$tmp/s$z.ats" >"$tmp/ms$z.ats"
	"$bin/andrea-softmax" -z $z "$tmp/ms$z.ats" >"$tmp/a$z.ats"
	"$bin/andrea-attend" -m "$m" -z $z --proj "$tmp/a$z.ats" >"$tmp/y$z.ats"
	"$bin/andrea-embed" -m "$m" -z $z --tokens 1,2,3 --keep --no-shuffle \
		</dev/null >"$tmp/t$z.ats"
done
# the first byte picks decode/copy/skip per record and the threads
for f in "$tmp"/x*.ats "$tmp"/qkv*.ats "$tmp"/s*.ats "$tmp"/ms*.ats \
	 "$tmp"/a*.ats "$tmp"/y*.ats "$tmp"/t*.ats; do
	for mode in '\000' '\125' '\252' '\344'; do
		i=$((i + 1))
		{ printf "$mode"; cat "$f"; } >"$out/stream/seed$i"
	done
done
{ printf '\000'; cat "$tmp/x1.ats" "$tmp/qkv9.ats"; } >"$out/stream/cat"
{ printf '\125'; cat "$m"; } >"$out/stream/model"

# .npy files as andrea-unpack writes them: f32, i32, rank 0..3
"$bin/andrea-unpack" -d "$tmp/npy1" "$tmp/qkv1.ats"
"$bin/andrea-unpack" -d "$tmp/npy2" "$tmp/a0.ats"
for f in "$tmp"/npy1/*.npy "$tmp"/npy2/*.npy; do
	cp "$f" "$out/npy/$(basename "$(dirname "$f")")-$(basename "$f")"
done
printf "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }" \
	>"$out/npy/header-only"

# model files: the first byte is --heads (0: from the config)
for h in 0 2; do
	{ printf "\\00$h"; cat "$m"; } >"$out/model/tiny$h"
	{ printf "\\00$h"; cat "$tmp/m0.ats"; } >"$out/model/stored$h"
done
"$bin/andrea-train" --steps 0 --layers 1 --heads 1 --d-model 4 --ctx 2 \
	--vocab 3 -o "$tmp/m1.ats"
{ printf '\001'; cat "$tmp/m1.ats"; } >"$out/model/smallest"

# attribute blocks like the ones the stages write
printf 'layer=0\nhead=1\n' >"$out/attrs/layer"
printf 'scale=0.35355339\nmask=causal\nfill=-inf\n' >"$out/attrs/scores"
printf 'n_layer=1\nn_head=2\nd_model=8\nctx=8\nvocab=257\n' >"$out/attrs/config"
printf '' >"$out/attrs/empty"

# command lines, one per line, words separated by spaces
n=0
while IFS= read -r line; do
	n=$((n + 1))
	printf '%s' "$line" | tr ' ' '\000' >"$out/argv/cmd$n"
done <<'LINES'
andrea-embed -m m.ats --text --bos -z 9 --threads 2 text.txt
andrea-embed --tokens 1,2,3 --seed 5 --heads 12 -o x.ats --keep --no-shuffle
andrea-qkv -m m.ats -l 1 --head 0 --no-norm --device cpu -f x.ats
andrea-scores --scale 0.5 --keep qkv.ats
andrea-scores --no-scale -o s.ats -
andrea-mask --fill -1e9 s.ats
andrea-softmax --threads 4 --device auto ms.ats
andrea-attend --proj -l 0 -m m.ats --heads 2 a.ats
andrea-attend --concat --keep a.ats
andrea-block -l 0,1 -m m.ats x.ats
andrea-logits --last -m m.ats y.ats
andrea-pack -a x:layer=0 -z 1 x=x.npy
andrea-unpack -d out a.ats b.ats
andrea-show -p --full --select 0,1 --name x a.ats
andrea-show --ascii --png out.png a.ats
andrea-diff -q --rtol 1e-5 --atol 0 --equal-nan a.ats b.ats
andrea-generate -m m.ats --prompt hello -n 5 --temperature 0.8 --top-k 10 --seed 3
andrea-train -o m.ats --steps 0 --config tiny --layers 2 --heads 4 --d-model 64 --ctx 16 --vocab 257
andrea-train -o m.ats --data d.txt --steps 10 --batch 2 --seq 8 --lr 1e-3 --min-lr 1e-4 --warmup 2 --weight-decay 0.1 --clip 1 --val-fraction 0.1 --eval-every 5 --eval-batches 2 --save-every 5 --checkpoint c.ats --log log.txt --progress
andrea-train -o m.ats --data d.txt --resume --stop-at 4 --dump-grads g.ats
andrea-train --forward -m m.ats --text -f d.txt
andrea-train --forward --tokens 1,2 -o f.ats --config andrea-12m
andrea-qkv --version
andrea-mask -h
andrea-import -o m.ats --config config.json gpt2/
LINES

# safetensors files: one of each dtype, F32 matrices, metadata; and a
# GPT-2 one that imports (the header and its data, written here)
st() { # st NAME JSON DATA-BYTES: the 8-byte length, the header, the data
	len=$(printf '%s' "$2" | wc -c)
	le=""
	for i in 0 1 2 3 4 5 6 7; do
		le="$le$(printf '\\%03o' $(((len >> (8 * i)) & 255)))"
	done
	{ printf "$le"; printf '%s' "$2"; head -c "$3" /dev/urandom; } \
		>"$out/safetensors/$1"
}
st f32 '{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}' 24
st mixed '{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]},"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}' 16
st int '{"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"e":{"dtype":"U8","shape":[0],"data_offsets":[8,8]}}' 8
st empty '{}' 0
# llm.c checkpoints: versions 3 (float32) and 5 (bfloat16) of a model
# with C = 2, one layer, V = 3 padded to 4, a context of 2
for v in 3 5; do
	python3 -c "
import struct, sys
L, H, C, V, Vp, T = 1, 1, 2, 3, 4, 2
n = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
head = struct.pack('<8i', 20240326, $v, T, V, L, H, C, Vp) + bytes(992)
sys.stdout.buffer.write(head + bytes(range(256)) * (n * (4 if $v == 3 else 2) // 256)
                        + bytes(n * (4 if $v == 3 else 2) % 256))
" >"$out/llmc/v$v"
done
printf '{"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 300}' \
	>"$out/gpt2config/small"
printf '{"n_layer": 12, "n_head": 12, "n_embd": 768, "n_ctx": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new", "n_inner": null, "scale_attn_weights": true, "tie_word_embeddings": true, "reorder_and_upcast_attn": false}' \
	>"$out/gpt2config/gpt2"
printf '{"n_layer": 1, "n_head": 2, "n_embd": 6, "n_positions": 4, "vocab_size": 9, "activation_function": "gelu"}' \
	>"$out/gpt2config/refused"
echo "make-corpus: $(ls "$out"/*/ | grep -vc ':$') seeds in $out"
