#!/bin/sh
# scale.sh - why the scores are scaled by 1/sqrt(D): unit-variance q and
# k of D = 64, 256, 4096 give dot products whose spread grows as sqrt(D),
# and the softmax of unscaled scores collapses onto one key while the
# scaled one keeps its spread.  Table: scale.txt; figure: scale.png.
# EXP_T sets the positions (64).
. "$(dirname "$0")/common"
T=${EXP_T:-64}
printf '%6s %10s %10s %12s %12s\n' D std sqrt_D H_unscaled H_scaled > table
for D in 64 256 4096; do
	"$py" -c "
import numpy as np
r = np.random.default_rng($D)
for n in 'qk':
    np.save(n + '.npy', r.standard_normal((1, 1, $T, $D)).astype(np.float32))"
	andrea-pack q=q.npy k=k.npy -o qk.ats
	andrea-scores --no-scale qk.ats | andrea-unpack -d dots
	andrea-scores --no-scale qk.ats | andrea-mask | andrea-softmax | andrea-unpack -d raw
	andrea-scores qk.ats | andrea-mask | andrea-softmax | andrea-unpack -d scaled
	"$py" -c "
import numpy as np
H = lambda a: -(a * np.log(np.where(a > 0, a, 1))).sum(-1).mean()
s = np.load('dots/scores.npy')
print('%6d %10.3f %10.3f %12.4f %12.4f' % ($D, s.std(), $D ** 0.5,
      H(np.load('raw/attn.npy')), H(np.load('scaled/attn.npy'))))" >> table
done
cp table "$out/scale.txt"
cat table
# the most a causal row can have: uniform weights, ln(i + 1) for row i
uniform=$("$py" -c "import math; print(sum(math.log(i + 1) for i in range($T)) / $T)")
plot "$out/scale.png" "
set title 'Softmax of causal scores, $T positions: mean row entropy (nats)';
set xlabel 'D (head width), measured at 64, 256 and 4096'; set ylabel 'entropy';
set logscale x 2; set key center right; set yrange [0:*];
plot 'table' every ::1 using 1:5 with linespoints lw 2 pt 7 title 'scaled by 1/sqrt(D)',
     '' every ::1 using 1:4 with linespoints lw 2 pt 7 title 'unscaled',
     $uniform with lines dt 2 lw 1 title 'uniform weights (the most)'"
