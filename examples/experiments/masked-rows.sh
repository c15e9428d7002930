#!/bin/sh
# masked-rows.sh - the causal mask and the softmax: every row i of every
# head sums to 1 over positions 0 to i and is exactly 0 beyond.  Table:
# masked-rows.txt (per head: the largest |row sum - 1| and the largest
# weight above the diagonal); figure: masked-rows.png, the twelve heads of
# layer 0 on the default model.  EXP_TEXT sets the sentence.
. "$(dirname "$0")/common"
printf '%s' "${EXP_TEXT:-the cat sat on the mat}" | andrea-embed --text |
	andrea-qkv | andrea-scores | andrea-mask | andrea-softmax -o attn.ats
andrea-unpack -d w attn.ats
"$py" -c "
import numpy as np
a = np.load('w/attn.npy')[0]
print('%4s %14s %14s' % ('head', 'max|sum-1|', 'max above'))
for h in range(a.shape[0]):
    print('%4d %14.3g %14.3g' % (h, abs(a[h].sum(-1) - 1).max(), np.triu(a[h], 1).max()))" > table
cp table "$out/masked-rows.txt"
cat table
andrea-show --png "$out/masked-rows.png" --name attn --grid --select 0 attn.ats
