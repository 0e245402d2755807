#!/usr/bin/env bash
# The house check: the storage, protocol and offsets benches at an older
# commit (OLD, default 4de686e, before the house work) against this tree,
# run interleaved (old, new, old, new, ...) REPS times in --quick mode, so
# both sides meet the same machine weather. perf/house_benches.py takes the
# median of the runs per row and side and gives new ÷ old, for the bench's
# own figure and for its ratio to the baseline it measures in the same run.
#
#   perf/house-benches.sh                # OLD=4de686e REPS=3
#   OLD=<rev> BENCHES="storage" perf/house-benches.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
OLD="${OLD:-4de686e}"
BENCHES="${BENCHES:-storage protocol offsets}"
MODE="${MODE:---quick}"
work=target/house-benches
old_tree="$work/old-$OLD"
old_target="$PWD/$work/target-old"
if [ ! -d "$old_tree" ]; then
    git worktree add -f --detach "$old_tree" "$OLD"
fi
echo "== building the benches at $OLD and at this tree"
(cd "$old_tree" && CARGO_TARGET_DIR="$old_target" cargo bench --no-run)
cargo bench --no-run
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src benches || echo -dirty)"
OUT="${OUT:-perf/results/$(date -u +%Y%m%dT%H%M%SZ)-$COMMIT-house-benches}"
mkdir -p "$OUT"
{
    echo "old: $OLD ($(git rev-parse --short "$OLD")), new: $COMMIT"
    echo "params: benches $BENCHES, $MODE, $REPS interleaved rounds"
} >"$OUT/params.txt"
for rep in $(seq 1 "$REPS"); do
    for bench in $BENCHES; do
        echo "== round $rep/$REPS: $bench at $OLD"
        (cd "$old_tree" && CARGO_TARGET_DIR="$old_target" cargo bench -q --bench "$bench" -- $MODE) \
            >"$OUT/old-$bench-$rep.txt"
        echo "== round $rep/$REPS: $bench at $COMMIT"
        cargo bench -q --bench "$bench" -- $MODE >"$OUT/new-$bench-$rep.txt"
    done
done
python3 perf/house_benches.py "$OUT" | tee "$OUT/summary.md"
