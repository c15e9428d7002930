#!/bin/sh
# fill.sh - what the mask's fill value does: -inf and -1e9 give the same
# weights (none on the hidden keys), while a finite fill near the scores
# lets weight leak onto the future.  Table: fill.txt (the mean weight on
# hidden keys per row, for each fill); figure: fill.png.  EXP_T sets the
# positions (64).
. "$(dirname "$0")/common"
T=${EXP_T:-64}
"$py" -c "
import numpy as np
r = np.random.default_rng(0)
np.save('s.npy', (r.standard_normal((1, 1, $T, $T)) * 2).astype(np.float32))"
andrea-pack scores=s.npy -o s.ats
printf '%10s %14s %14s\n' fill leaked float64 > table
for fill in -inf -1e9 -50 -30 -20 -10 -5 -2 -1; do
	andrea-mask --fill "$fill" s.ats | andrea-softmax | andrea-unpack -d a
	"$py" -c "
import numpy as np
a = np.load('a/attn.npy')[0, 0]
# what the softmax leaks in exact arithmetic: e^fill over each row's sum
s = np.load('s.npy')[0, 0].astype(np.float64)
hidden = np.triu(np.ones(s.shape, bool), 1)
m = np.where(hidden, float('$fill'), s)
p = np.exp(m - m.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
print('%10s %14.6g %14.6g' % ('$fill', np.triu(a, 1).sum(-1).mean(),
                              np.where(hidden, p, 0).sum(-1).mean()))" >> table
done
cp table "$out/fill.txt"
cat table
plot "$out/fill.png" "
set title 'Weight leaked onto hidden keys by a finite mask fill ($T positions)';
set xlabel '|fill|'; set ylabel 'mean weight on hidden keys per row';
set logscale xy; set format y '%.0e'; set key bottom left;
set label 'fill -1e9 and -inf: exactly 0 (off a log axis)' at graph 0.42, graph 0.9;
plot '< tail -n +4 table' using (-\$1):3 with lines lw 1 dt 2 title 'float64 softmax',
     '' using (-\$1):2 with points pt 7 ps 1.3 title 'andrea-mask | andrea-softmax'"
