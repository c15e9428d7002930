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
printf '%10s %14s\n' fill leaked > table
for fill in -inf -1e9 -50 -30 -20 -10 -5 -2 -1; do
	andrea-mask --fill "$fill" s.ats | andrea-softmax | andrea-unpack -d a
	"$py" -c "
import numpy as np
a = np.load('a/attn.npy')[0, 0]
print('%10s %14.6g' % ('$fill', np.triu(a, 1).sum(-1).mean()))" >> table
done
cp table "$out/fill.txt"
cat table
plot "$out/fill.png" "
set title 'Weight leaked onto hidden keys by a finite mask fill ($T positions)';
set xlabel '|fill|'; set ylabel 'mean weight on hidden keys per row';
set logscale xy; set format y '%.0e';
plot '< tail -n +4 table' using (-\$1):2 with linespoints lw 2 notitle"
