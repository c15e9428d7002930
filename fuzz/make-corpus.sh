#!/bin/sh
# make-corpus.sh DIR - seed corpora for the fuzz targets, made by the
# project's own tools in bin/: DIR/stream, DIR/npy, DIR/model, DIR/attrs,
# DIR/argv and the rest named below.  The inputs are kept small (a 1-layer
# model with C = 8) so the fuzzers run fast; each target's first byte
# conventions are in its source (fuzz/fuzz_*.c).
set -eu
out=${1:-build/fuzz/corpus}
bin=$(cd "$(dirname "$0")/.." && pwd)/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in stream npy model attrs argv safetensors gpt2config llmc \
	 vocab tokjson tokrecords rendezvous checkpoint capture; do
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

# captures as --patch and --ablate :mean=FILE read them: andrea-block's
# and andrea-generate's as streams (byte 0's top bit set), and records
# made by the harness (fuzz/fuzz_capture.c's layout); two bytes first
# (the run's shape and selection, the mean's layer and head)
for z in 0 1; do
	"$bin/andrea-block" -m "$m" -z $z -l all --capture out --capture x@1 \
		--capture q:0:1 --capture attn@0 "$tmp/x$z.ats" >"$tmp/cap$z.ats"
done
printf hi | "$bin/andrea-generate" -m "$m" -n 2 --capture logits \
	--capture embed --capture out:0:1 --capture-file "$tmp/cap2.ats" \
	>/dev/null
for f in "$tmp"/cap*.ats; do
	for b in '\200\000' '\313\020' '\377\001'; do
		i=$((i + 1))
		{ printf "$b"; cat "$f"; } >"$out/capture/seed$i"
	done
done
printf '\000\000\007\004\002\002\003\004\023captured=1\nlayer=0\n' \
	>"$out/capture/out"
printf '\121\021\007\004\002\001\003\004\032captured=1\nlayer=1\nhead=1\n' \
	>"$out/capture/out-head"
printf '\007\000\017\003\002\002\010\041captured=1\nlayer=0\npositions=1,4\n' \
	>"$out/capture/x-positions"
printf '\000\000\000\003\001\003\004\013captured=1\n' >"$out/capture/embed"

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
# a rendezvous message of rank 0 for 4 ranks and a hello of rank 3
# (byte 0: world 4, the message or the hello)
python3 - "$out/rendezvous" <<'PY'
import struct, sys, zlib
msg = b"andrRDV1" + struct.pack("<I", 4) + bytes(range(128))
open(sys.argv[1] + "/message", "wb").write(
    bytes([3 << 1]) + msg + struct.pack("<I", zlib.crc32(msg)))
open(sys.argv[1] + "/hello", "wb").write(
    bytes([3 << 1 | 1]) + b"andrHEL1" + struct.pack("<II", 4, 3))
PY
# GPT-2 tokenizers: the 256 tokens of the byte-level alphabet and a few
# merges, as vocab.json NUL merges.txt (vocab), as tokenizer.json
# (tokjson), and as the records of a model file (tokrecords): imported
# with a tiny checkpoint (L = 1, C = 2, V = 260) and packed by hand
python3 - "$tmp" <<'PY'
import json, struct, sys
tmp = sys.argv[1]
keep = [b for b in range(256) if 0x21 <= b <= 0x7e or 0xa1 <= b <= 0xac or b >= 0xae]
other = [b for b in range(256) if b not in keep]
char = {b: chr(b) if b in keep else chr(256 + other.index(b)) for b in range(256)}
vocab = {char[b]: b for b in range(256)}
extra = ["\u0120t", "he", "\u0120the", "<|endoftext|>"]
for i, t in enumerate(extra):
    vocab[t] = 256 + i
merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he")]
def w(name, text):
    open(f"{tmp}/{name}", "w", encoding="utf-8").write(text)
w("vocab.json", json.dumps(vocab, ensure_ascii=False))
w("vocab-escaped.json", json.dumps({k: v for k, v in vocab.items() if k != "<|endoftext|>"}))
w("merges.txt", "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
w("merges-crlf.txt", "".join(f"{a} {b}\r\n" for a, b in merges[:2]))
added = [{"id": 259, "content": "<|endoftext|>", "single_word": False,
          "lstrip": False, "rstrip": False, "normalized": True, "special": True}]
def tokjson(merge_list, added_tokens):
    return json.dumps({"version": "1.0", "truncation": None, "padding": None,
                       "added_tokens": added_tokens, "normalizer": None,
                       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                         "trim_offsets": True, "use_regex": True},
                       "post_processor": None, "decoder": {"type": "ByteLevel"},
                       "model": {"type": "BPE", "dropout": None, "unk_token": None,
                                 "continuing_subword_prefix": None,
                                 "end_of_word_suffix": None, "fuse_unk": False,
                                 "byte_fallback": False, "vocab": vocab,
                                 "merges": merge_list}}, ensure_ascii=False)
w("pairs.json", tokjson([list(m) for m in merges], added))
w("strings.json", tokjson([f"{a} {b}" for a, b in merges],
                          [dict(added[0], special=False)]))
w("no-added.json", tokjson([list(m) for m in merges[:1]], []))
# a GPT-2 checkpoint in Hugging Face's names (tied, no lm_head)
L, H, C, V, T = 1, 1, 2, 260, 2
shapes = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [T, C],
          "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
for p in ("ln_1", "ln_2"):
    shapes[f"transformer.h.0.{p}.weight"] = [C]
    shapes[f"transformer.h.0.{p}.bias"] = [C]
for p, s in (("attn.c_attn", [C, 3 * C]), ("attn.c_proj", [C, C]),
             ("mlp.c_fc", [C, 4 * C]), ("mlp.c_proj", [4 * C, C])):
    shapes[f"transformer.h.0.{p}.weight"] = s
    shapes[f"transformer.h.0.{p}.bias"] = [s[1]]
head, data = {}, b""
for name in sorted(shapes):
    n = 1
    for d in shapes[name]:
        n *= d
    head[name] = {"dtype": "F32", "shape": shapes[name],
                  "data_offsets": [len(data), len(data) + 4 * n]}
    data += struct.pack(f"<{n}f", *[0.01 * (i % 7) for i in range(n)])
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(f"{tmp}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
w("config.json", json.dumps({"n_layer": L, "n_head": H, "n_embd": C,
                             "n_positions": T, "vocab_size": V}))
# the three records' arrays as .npy files for andrea-pack
def npy(name, descr, shape, raw):
    hd = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join(f"{d}," for d in shape))
    hd += " " * (-(len(hd) + 11) % 64) + "\n"
    open(f"{tmp}/{name}.npy", "wb").write(b"\x93NUMPY\x01\x00" +
                                          struct.pack("<H", len(hd)) + hd.encode() + raw)
toks = [bytes([b]) for b in range(256)] + [b" t", b"he", b" the", b"<|endoftext|>"]
npy("vocab", "|u1", [sum(map(len, toks))], b"".join(toks))
npy("lengths", "<i4", [len(toks)], struct.pack(f"<{len(toks)}i", *map(len, toks)))
ids = [(32, 116), (104, 101), (256, 257)]
npy("merges", "<i4", [len(ids), 2], b"".join(struct.pack("<2i", a, b) for a, b in ids))
npy("no-merges", "<i4", [0, 2], b"")
npy("added", "<i4", [2], struct.pack("<2i", 259, 258))
npy("added-bad", "<i4", [2], struct.pack("<2i", 259, 900))
PY
{ cat "$tmp/vocab.json"; printf '\000'; cat "$tmp/merges.txt"; } >"$out/vocab/small"
{ cat "$tmp/vocab-escaped.json"; printf '\000'; cat "$tmp/merges-crlf.txt"; } \
	>"$out/vocab/escaped-crlf"
cat "$tmp/vocab.json" >"$out/vocab/no-merges"
for j in pairs strings no-added; do
	cp "$tmp/$j.json" "$out/tokjson/$j"
done
mkdir "$tmp/gpt2"
mv "$tmp/model.safetensors" "$tmp/config.json" "$tmp/gpt2/"
for z in 0 1; do
	"$bin/andrea-import" -z $z --vocab "$tmp/vocab.json" --merges "$tmp/merges.txt" \
		-o "$out/tokrecords/imported$z" "$tmp/gpt2"
done
"$bin/andrea-import" --tokenizer "$tmp/strings.json" -o "$out/tokrecords/from-json" \
	"$tmp/gpt2"
v=tokenizer.vocab
"$bin/andrea-pack" -z 0 -a $v:kind=gpt2-bpe -a $v:tokens=260 -a $v:bos=259 \
	-o "$out/tokrecords/packed" $v="$tmp/vocab.npy" \
	tokenizer.lengths="$tmp/lengths.npy" tokenizer.merges="$tmp/merges.npy" \
	tokenizer.added="$tmp/added.npy"
"$bin/andrea-pack" -z 9 -a $v:kind=gpt2-bpe -o "$out/tokrecords/no-merges" \
	$v="$tmp/vocab.npy" tokenizer.lengths="$tmp/lengths.npy" \
	tokenizer.merges="$tmp/no-merges.npy"
# and records that at_tok_from_records refuses, one reason each (their
# attributes are under the header's CRC32, which mutations rarely keep)
i=0
for a in kind=wordpiece bos=900 bos=x; do
	i=$((i + 1))
	kind="-a $v:kind=gpt2-bpe" # where $a does not set another
	[ "${a%%=*}" = kind ] && kind=
	"$bin/andrea-pack" -z 0 $kind -a $v:$a \
		-o "$out/tokrecords/refused$i" $v="$tmp/vocab.npy" \
		tokenizer.lengths="$tmp/lengths.npy" tokenizer.merges="$tmp/merges.npy"
done
"$bin/andrea-pack" -z 0 -a $v:kind=gpt2-bpe -o "$out/tokrecords/added-bad" \
	$v="$tmp/vocab.npy" tokenizer.lengths="$tmp/lengths.npy" \
	tokenizer.merges="$tmp/merges.npy" tokenizer.added="$tmp/added-bad.npy"
"$bin/andrea-pack" -z 0 -a $v:kind=gpt2-bpe -o "$out/tokrecords/merges-rank1" \
	$v="$tmp/vocab.npy" tokenizer.lengths="$tmp/lengths.npy" \
	tokenizer.merges="$tmp/lengths.npy"
# checkpoints as andrea-train writes them: the tiny model's at two
# levels, and the imported GPT-2 one's (biases, a tied head, a
# tokenizer), each after two steps on a few bytes
head -c 3000 "$tmp/vocab.json" >"$tmp/d.txt"
for z in 0 1; do
	"$bin/andrea-train" -m "$m" -z $z --data "$tmp/d.txt" --steps 2 \
		--batch 2 --seq 4 --checkpoint "$out/checkpoint/tiny$z" \
		-o "$tmp/trained.ats" 2>/dev/null
done
"$bin/andrea-train" -m "$out/tokrecords/imported1" --data "$tmp/d.txt" \
	--steps 2 --batch 1 --seq 2 --checkpoint "$out/checkpoint/gpt2" \
	-o "$tmp/trained.ats" 2>/dev/null
echo "make-corpus: $(ls "$out"/*/ | grep -vc ':$') seeds in $out"
