#!/bin/sh
# demo.sh - one attention head of the default model, stage by stage, in
# a few seconds.  Run by `make demo` after the build; the training tour
# is examples/training-tour.sh.
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
echo "\$ andrea-show --ascii --labels --select 0,3 --name attn head.ats   # rows sum to 1 over 0..i"
andrea-show --ascii --labels --select 0,3 --name attn "$work/head.ats"
echo
echo "# more: man 7 andrea; training a tiny model and looking inside it:"
echo "#   sh examples/training-tour.sh   (some minutes on 2 cores, with progress)"

