#!/bin/sh
# training-tour.sh - train a tiny model (C 64, H 4, L 2) on the fortunes,
# let it write, and look at one of its heads.  About 15 s on 2 cores;
# andrea-train shows its progress.  ANDREA_TOUR_STEPS changes the length.
set -eu
cd "$(dirname "$0")/.."
PATH="$PWD/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=${ANDREA_TOUR_STEPS:-1000}
fortunes=/usr/share/games/fortunes
if [ ! -d "$fortunes" ]; then
	echo "training-tour.sh: no $fortunes (Debian's fortunes package)" >&2
	exit 1
fi
echo "# train a tiny model (C 64, H 4, L 2) on the fortunes for $steps steps"
find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort |
	xargs cat > "$work/fortunes.txt"
echo "\$ andrea-train --config tiny --data fortunes.txt --steps $steps --batch 8 --seq 64 --lr 3e-3 \\"
echo "    --warmup 50 --eval-every 500 --log log.jsonl --progress -o tiny.ats"
andrea-train --config tiny --data "$work/fortunes.txt" --steps "$steps" --batch 8 \
	--seq 64 --lr 3e-3 --warmup 50 --eval-every 500 --log "$work/log.jsonl" \
	--progress -o "$work/tiny.ats"
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
