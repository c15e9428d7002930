#!/bin/sh
# training-story.sh - a tiny model learns the fortunes: its loss curve,
# and head 1 of layer 0 at checkpoints along the way, turning from a
# smear into a previous-token head.  Table: training-story.txt (the log's
# steps, loss and held-out loss); figures: training-story.png (the
# curve) and training-story-heads.png (the head at each checkpoint, the
# grid's checkpoint 0 to 3 a quarter of the run to all of it).
# EXP_STEPS sets the length (2000; the head sharpens after a few hundred).
. "$(dirname "$0")/common"
steps=${EXP_STEPS:-2000}
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || { echo "training-story.sh: no $fortunes" >&2; exit 1; }
find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort |
	xargs cat > fortunes.txt
every=$((steps / 4))
printf 'the cat sat on the mat' > s.txt
i=0
for stop in $every $((2 * every)) $((3 * every)) $steps; do
	andrea-train --config tiny --data fortunes.txt --steps "$steps" --seq 64 \
		--lr 3e-3 --eval-every "$every" --log log.jsonl -o tiny.ats \
		$([ $i -gt 0 ] && echo --resume) --stop-at "$stop" 2>/dev/null
	andrea-embed -m tiny.ats --text s.txt | andrea-qkv -m tiny.ats --head 1 |
		andrea-scores | andrea-mask | andrea-softmax | andrea-unpack -d "c$i"
	i=$((i + 1))
done
"$py" -c "
import json, numpy as np
print('%6s %8s %8s' % ('step', 'loss', 'val_loss'))
for line in open('log.jsonl'):
    r = json.loads(line)
    if 'val_loss' in r:
        print('%6d %8.4f %8.4f' % (r['step'], r['loss'], r['val_loss']))
a = np.concatenate([np.load('c%d/attn.npy' % i) for i in range(4)], 1)
np.save('heads.npy', a)" > table
"$py" -c "
import json
for line in open('log.jsonl'):
    r = json.loads(line)
    print(r['step'], r['loss'], r.get('val_loss', '?'))" > curve
cp table "$out/training-story.txt"
cat table
plot "$out/training-story.png" "
set title 'tiny (C 64, H 4, L 2) on the fortunes'; set xlabel 'step';
set ylabel 'loss (nats per byte)'; set datafile missing '?';
plot 'curve' using 1:2 with lines title 'training batch',
     '' using 1:3 with linespoints lw 2 pt 7 title 'held-out'"
andrea-pack -a "attn:mask=causal" -a attn:layer=0 -a attn:head=1 \
	-a "attn:axes=row,checkpoint,query position i,key position j" attn=heads.npy |
	andrea-show --png "$out/training-story-heads.png" --grid --select 0
