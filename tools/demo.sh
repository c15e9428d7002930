#!/bin/sh
# demo.sh - one attention head of the default model, stage by stage.
# Run by `make demo` after the build.
set -eu
cd "$(dirname "$0")/.."
PATH="$PWD/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sentence=${ANDREA_DEMO_TEXT:-the cat sat on the mat}

echo "# the default model (andrea-120m shapes, seed 1337), layer 0, all 12 heads"
echo "\$ printf '%s' '$sentence' | andrea-embed --text --bos | andrea-qkv | andrea-scores \\"
echo "    | andrea-mask | andrea-softmax --keep | andrea-attend --keep > head.ats"
printf '%s' "$sentence" | andrea-embed --text --bos | andrea-qkv | andrea-scores |
	andrea-mask | andrea-softmax --keep | andrea-attend --keep > "$work/head.ats"
echo
echo "\$ andrea-show head.ats"
andrea-show "$work/head.ats"
echo
echo "\$ andrea-show --ascii --select 0,3 --name scores head.ats   # batch 0, head 3; _ = masked"
andrea-show --ascii --select 0,3 --name scores "$work/head.ats"
echo
echo "\$ andrea-show --ascii --select 0,3 --name attn head.ats     # each row sums to 1 over 0..i"
andrea-show --ascii --select 0,3 --name attn "$work/head.ats"

fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || exit 0
echo
echo "# train a tiny model (C 64, H 4, L 2) on the fortunes for 1000 steps"
find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort |
	xargs cat > "$work/fortunes.txt"
echo "\$ andrea-train --config tiny --data fortunes.txt --steps 1000 --seq 64 --lr 3e-3 -o tiny.ats"
andrea-train --config tiny --data "$work/fortunes.txt" --steps 1000 --batch 8 \
	--seq 64 --lr 3e-3 --warmup 50 --eval-every 500 --log "$work/log.jsonl" \
	-o "$work/tiny.ats"
grep val_loss "$work/log.jsonl" | sed 's/^/  /'
echo
echo "\$ andrea-generate -m tiny.ats --prompt 'The ' -n 120"
andrea-generate -m "$work/tiny.ats" --prompt 'The ' -n 120
echo
echo
echo "\$ printf 'Q: Why did the chicken cross the road?' | andrea-embed -m tiny.ats --text \\"
echo "    | andrea-block -m tiny.ats -l 0 | andrea-qkv -m tiny.ats -l 1 --head 2 | andrea-scores \\"
echo "    | andrea-mask | andrea-softmax | andrea-show --ascii --name attn   # head 2 of layer 1"
printf 'Q: Why did the chicken cross the road?' | andrea-embed -m "$work/tiny.ats" --text |
	andrea-block -m "$work/tiny.ats" -l 0 | andrea-qkv -m "$work/tiny.ats" -l 1 --head 2 |
	andrea-scores | andrea-mask | andrea-softmax | andrea-show --ascii --name attn
