#!/usr/bin/env bash
# Model check of the versioned shared-state protocol (docs/model.md): spin
# runs share/model/shared.pml under each bound below and must find no violation;
# then each deliberately broken variant must make spin find one (an error
# trail). Exits non-zero otherwise. Needs spin and a C compiler.
#
# Memory is fixed: a bitstate search (-DBITSTATE) with a 2^28-bit (32MB)
# hash array, several times the reachable states of each bound (the script
# prints spin's hash factor; above ~20 the search is close to exhaustive).
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME -DOPTION... : builds and runs the verifier in $work/NAME and
# prints its summary; the exit status is spin's count of errors (0 or 1).
run() {
  local name=$1; shift
  mkdir -p "$work/$name"
  cp shared.pml "$work/$name/"
  (
    cd "$work/$name"
    spin -a "$@" shared.pml >spin.out
    cc -O1 -w -DSAFETY -DBITSTATE -o pan pan.c
    start=$(date +%s.%N)
    ./pan -w28 -m100000 >pan.out 2>&1 || true
    end=$(date +%s.%N)
    states=$(awk '/states, stored/ {print $1}' pan.out)
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out)
    factor=$(sed -n 's/.*hash factor: \([0-9.e+]*\).*/\1/p' pan.out)
    mem=$(awk '/total actual memory usage/ {print $1}' pan.out)
    printf '%-22s %s: %s states, depth %s, hash factor %s, %sMB, %.1fs, errors %s\n' \
      "$name" "$*" "$states" "$depth" "${factor:--}" "$mem" "$(echo "$end - $start" | bc)" "$errors"
    grep -m1 "^pan:1:" pan.out | sed 's/^/    /' || true
    [ -n "$errors" ] && exit "$errors"
    echo "    spin did not finish:"; cat pan.out; exit 2
  )
}

fail=0
# The bounds: two replicas and an operator on one key, a budget of 1.
ops="-DSTATELOSS=0 -DLOSSES=0 -DOPS=2 -DJUDGES=2 -DTIMEOUTS=0"       # two resumes/forgets, late requests
doubt="-DSTATELOSS=0 -DLOSSES=0 -DOPS=1 -DJUDGES=2 -DTIMEOUTS=1"     # a call in doubt, deciding alone
stateloss="-DSTATELOSS=1 -DLOSSES=0 -DOPS=0 -DJUDGES=2 -DTIMEOUTS=1" # S loses its state
lossy="-DSTATELOSS=0 -DLOSSES=1 -DOPS=1 -DJUDGES=2 -DTIMEOUTS=0"     # a lost request or notice

# Each check: a name, what spin must report (0: no violation, 1: one), the
# options. They run two at a time (compiling the verifiers is most of it).
checks=(
  "ops 0 $ops"
  "doubt 0 $doubt"
  "stateloss 0 $stateloss"
  "lossy 0 $lossy"
  "blind-resume 1 -DBROKEN_RESUME $ops"                  # P1: today's resume clears a newer park
  "restore-ignores-seen 1 -DBROKEN_RESTORE $stateloss"   # P1: a write-back over a newer park
  "no-write-back 1 -DBROKEN_NOWB $stateloss"             # P3: a park gone with S's state
  "announce-without-claim 1 -DBROKEN_NOCLAIM $ops"       # P2: a park announced twice
  "notice-without-epoch 1 -DBROKEN_NOTICE $stateloss"    # P2: a notice of the state lost read as the new state's
)
pids=()
for c in "${checks[@]}"; do
  read -r name want opts <<<"$c"
  # shellcheck disable=SC2086
  ( set +e; run "$name" $opts >"$work/$name.log" 2>&1; echo $? >"$work/$name.rc" ) &
  pids+=($!)
  if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait

for c in "${checks[@]}"; do
  read -r name want opts <<<"$c"
  cat "$work/$name.log"
  rc=$(cat "$work/$name.rc")
  if [ "$rc" != "$want" ]; then
    if [ "$want" = 0 ]; then echo "FAIL: $name: the model must show no violation"; else echo "FAIL: $name: spin must find a violation in this broken variant"; fi
    fail=1
  fi
done

if [ "$fail" -ne 0 ]; then echo "share/model/check.sh: FAILED"; exit 1; fi
echo "share/model/check.sh: ok (the model: no violation under any bound; every broken variant caught)"
