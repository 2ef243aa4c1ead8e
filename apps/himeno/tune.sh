#!/usr/bin/env bash
# Picks the fused sweep's kernel: every candidate variant at M, L and XL, with
# the deterministic gosa and with none, ~SECONDS of sweeps each, by
# `tally himeno --variant` (hidden option). Prints one compact table; stays
# inside ~90 s on an H100 (24 runs of SECONDS + ~1 s setup each, checked).
#
#   apps/himeno/tune.sh [TALLY] [SECONDS]
#     TALLY    the built CLI (default build-gpu/tools/tally/tally)
#     SECONDS  sweeping time a run (default 1)
#
# The bar (issue 9): deterministic >= 1600 GFLOPS at L and XL, >= 1450 at M,
# and deterministic within 3 % of none. Correctness of each variant is the
# tests' job (tally_tests --gtest_filter='*himeno*' runs every variant).
set -uo pipefail
TALLY=${1:-build-gpu/tools/tally/tally}
SECONDS_EACH=${2:-1}
BUDGET_S=${TUNE_BUDGET_S:-88}
VARIANTS=${TUNE_VARIANTS:-"tile rows-1 rows-2 rows-3"}
SIZES=${TUNE_SIZES:-"M L XL"}

if [ ! -x "$TALLY" ]; then
  echo "tune.sh: no tally binary at $TALLY" >&2
  exit 2
fi

start=$SECONDS
rows=()
failed=0
for size in $SIZES; do
  for variant in $VARIANTS; do
    det="" none="" det_pct="" none_pct="" gosa=""
    for gosa_pattern in deterministic none; do
      if [ $((SECONDS - start)) -ge "$BUDGET_S" ]; then
        echo "tune.sh: out of time before $variant $size $gosa_pattern" >&2
        continue
      fi
      out=$(timeout 30 "$TALLY" himeno --size "$size" --gosa "$gosa_pattern" --seconds "$SECONDS_EACH" \
        --variant "$variant" 2>&1)
      rc=$?
      gflops=$(sed -n 's/^ GFLOPS: \([0-9.]*\).*/\1/p' <<<"$out" | tail -n 1)
      pct=$(sed -n 's/^ Memory-traffic floor.*: \([0-9.]*\) % reached.*/\1/p' <<<"$out" | tail -n 1)
      if [ $rc -ne 0 ] || [ -z "$gflops" ]; then
        failed=1
        echo "tune.sh: $variant $size $gosa_pattern failed (rc=$rc):" >&2
        tail -n 3 <<<"$out" >&2
        gflops="FAIL" pct="-"
      fi
      if [ "$gosa_pattern" = deterministic ]; then
        det=$gflops det_pct=$pct
        gosa=$(sed -n 's/^ Gosa : \([0-9.e+-]*\).*/\1/p' <<<"$out" | tail -n 1)
      else
        none=$gflops none_pct=$pct
      fi
    done
    cost="-"
    if [[ "$det" =~ ^[0-9.]+$ && "$none" =~ ^[0-9.]+$ ]]; then
      cost=$(awk -v d="$det" -v n="$none" 'BEGIN { printf "%+.1f%%", 100 * (n / d - 1) }')
    fi
    rows+=("$(printf '%-4s %-7s %9s %7s %9s %7s %8s  %s' "$size" "$variant" "$det" "$det_pct" "$none" "$none_pct" "$cost" "$gosa")")
  done
done

echo
echo "== himeno sweep variants (${SECONDS_EACH} s each, $((SECONDS - start)) s in all; bar: det >= 1600 at L/XL, >= 1450 at M, cost = none/det - 1 <= 3%)"
printf '%-4s %-7s %9s %7s %9s %7s %8s  %s\n' size variant "det GF/s" "%floor" "none GF/s" "%floor" "cost" "deterministic gosa"
for row in "${rows[@]}"; do echo "$row"; done
exit $failed
