#!/usr/bin/env bash
# Model check of the shared-state protocol (docs/model.md): spin runs
# share/model/shared.pml (the versioned protocol of a key), probe.pml (a
# probe at a time per key) and hold.pml (a hold per cause) under each bound
# below and must find no violation; then each deliberately broken variant
# must make spin find one (an error trail). Exits non-zero otherwise. Needs
# spin and a C compiler.
#
# Memory is fixed: a bitstate search (-DBITSTATE) with a 2^28-bit (32MB)
# hash array, several times the reachable states of each bound (the script
# prints spin's hash factor; above ~20 the search is close to exhaustive).
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME MODEL -DOPTION... : builds and runs the verifier of MODEL in
# $work/NAME and prints its summary; the exit status is spin's count of
# errors (0 or 1).
run() {
  local name=$1 model=$2; shift 2
  mkdir -p "$work/$name"
  cp "$model" "$work/$name/"
  (
    cd "$work/$name"
    spin -a "$@" "$model" >spin.out
    cc -O1 -w -DSAFETY -DBITSTATE -o pan pan.c
    start=$(date +%s.%N)
    ./pan -w28 -m100000 >pan.out 2>&1 || true
    end=$(date +%s.%N)
    states=$(awk '/states, stored/ {print $1}' pan.out)
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out)
    factor=$(sed -n 's/.*hash factor: \([0-9.e+]*\).*/\1/p' pan.out)
    mem=$(awk '/total actual memory usage/ {print $1}' pan.out)
    printf '%-22s %s %s: %s states, depth %s, hash factor %s, %sMB, %.1fs, errors %s\n' \
      "$name" "$model" "$*" "$states" "$depth" "${factor:--}" "$mem" "$(echo "$end - $start" | bc)" "$errors"
    grep -m1 "^pan:1:" pan.out | sed 's/^/    /' || true
    [ -n "$errors" ] && exit "$errors"
    echo "    spin did not finish:"; cat pan.out; exit 2
  )
}

fail=0
# The bounds of shared.pml: two replicas and an operator on one key, a
# budget of 1.
ops="-DSTATELOSS=0 -DLOSSES=0 -DOPS=2 -DJUDGES=2 -DTIMEOUTS=0"       # two resumes/forgets, late requests
doubt="-DSTATELOSS=0 -DLOSSES=0 -DOPS=1 -DJUDGES=2 -DTIMEOUTS=1"     # a call in doubt, deciding alone
stateloss="-DSTATELOSS=1 -DLOSSES=0 -DOPS=0 -DJUDGES=2 -DTIMEOUTS=1" # S loses its state
lossy="-DSTATELOSS=0 -DLOSSES=1 -DOPS=1 -DJUDGES=2 -DTIMEOUTS=0"     # a lost request or notice
# probe.pml: two replicas, a replica that dies; two parks, or one park and
# an operator's resume (both at once: 7.8 million states, 5 times these).
probe="-DN=2 -DPARKS=2 -DOPS=0 -DDEATHS=1"
probeop="-DN=2 -DPARKS=1 -DOPS=1 -DDEATHS=1"
# hold.pml: four keys (a replica each), a hold at two, six failures, a
# replica that dies, a lost reply.
hold="-DK=4 -DKEYS=2 -DFAILS=6 -DDEATHS=1 -DLOSSES=1"

# Each check: a name, what spin must report (0: no violation, 1: one), the
# model, the options. They run two at a time, the longest (doubt) first.
checks=(
  "doubt 0 shared.pml $doubt"
  "ops 0 shared.pml $ops"
  "stateloss 0 shared.pml $stateloss"
  "lossy 0 shared.pml $lossy"
  "probe 0 probe.pml $probe"
  "probe-op 0 probe.pml $probeop"
  "hold 0 hold.pml $hold"
  "blind-resume 1 shared.pml -DBROKEN_RESUME $ops"                # P1: today's resume clears a newer park
  "restore-ignores-seen 1 shared.pml -DBROKEN_RESTORE $stateloss" # P1: a write-back over a newer park
  "no-write-back 1 shared.pml -DBROKEN_NOWB $stateloss"           # P3: a park gone with S's state
  "announce-without-claim 1 shared.pml -DBROKEN_NOCLAIM $ops"     # P2: a park announced twice
  "notice-without-epoch 1 shared.pml -DBROKEN_NOTICE $stateloss"  # P2: a notice of the state lost read as the new state's
  "probe-keeps-lease 1 probe.pml -DBROKEN_LEASE $probe"           # P5: two probes of one key in one lease
  "probe-announces-alone 1 probe.pml -DBROKEN_PROBE_NOCLAIM $probe" # P6: a probe's resume announced twice
  "probe-claims-in-step 1 probe.pml -DBROKEN_PROBE_STEPCLAIM $probe" # P6: a probe's resume never announced (its replica died)
  "probe-resumed-twice 1 probe.pml -DBROKEN_RACE $probeop"          # P6: the operator's resume and the probe's both announced
  "healthy-names-no-park 1 probe.pml -DBROKEN_HEALTHY_ANY $probe" # P7: a probe's healthy step resumes a newer park
  "hold-keeps-lease 1 hold.pml -DBROKEN_HOLD_LEASE $hold"         # P8: two probers of one cause in one lease
  "held-from-every 1 hold.pml -DBROKEN_HELD_EVERY $hold"          # P9: fleet.cause_held announced twice
  "released-from-every 1 hold.pml -DBROKEN_RELEASED_EVERY $hold"  # P9: fleet.cause_released announced twice
  "prober-waits 1 hold.pml -DBROKEN_PROBER_WAIT $hold"            # P10: a dead prober strands the held keys
)
for c in "${checks[@]}"; do
  read -r name want model opts <<<"$c"
  # shellcheck disable=SC2086
  ( set +e; run "$name" "$model" $opts >"$work/$name.log" 2>&1; echo $? >"$work/$name.rc" ) &
  # the next check starts as soon as either running one ends
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
done
wait

for c in "${checks[@]}"; do
  read -r name want model opts <<<"$c"
  cat "$work/$name.log"
  rc=$(cat "$work/$name.rc")
  if [ "$rc" != "$want" ]; then
    if [ "$want" = 0 ]; then echo "FAIL: $name: the model must show no violation"; else echo "FAIL: $name: spin must find a violation in this broken variant"; fi
    fail=1
  fi
done

if [ "$fail" -ne 0 ]; then echo "share/model/check.sh: FAILED"; exit 1; fi
echo "share/model/check.sh: ok (the models: no violation under any bound; every broken variant caught)"
