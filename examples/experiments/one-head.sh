#!/bin/sh
# one-head.sh - one head computed alone (andrea-qkv --head 3) against the
# same head cut out of all twelve: equal to float32 rounding, at every
# stage.  Table: one-head.txt; figures: one-head.png (head 3's scores)
# and one-head-diff.png (the two computations' difference, signed).
. "$(dirname "$0")/common"
printf 'the cat sat on the mat' | andrea-embed --text -o x.ats
andrea-qkv x.ats | andrea-scores -o all.ats
andrea-qkv --head 3 x.ats | andrea-scores -o h3.ats
andrea-unpack -d all all.ats
andrea-unpack -d h3 h3.ats
"$py" -c "
import numpy as np
print('%8s %14s' % ('record', 'max abs diff'))
for n in ('v', 'scores'):
    a, b = np.load('all/%s.npy' % n)[:, 3:4], np.load('h3/%s.npy' % n)
    d = np.abs(np.where(np.isfinite(a), a, 0) - np.where(np.isfinite(b), b, 0)).max()
    print('%8s %14.3g' % (n, d))
a, b = np.load('all/scores.npy')[:, 3:4], np.load('h3/scores.npy')
np.save('diff.npy', np.where(np.isfinite(a) | np.isfinite(b), a - b, 0))" > table
cp table "$out/one-head.txt"
cat table
andrea-show --png "$out/one-head.png" --name scores h3.ats
andrea-pack -a "scores_difference:axes=row,head,query position i,key position j" \
	scores_difference=diff.npy |
	andrea-show --png "$out/one-head-diff.png" --shade signed
