#!/bin/sh
# fracgpu scheduler --adopt-hami-created-before: a value that is not a UTC timestamp in
# metadata.creationTimestamp's form is refused at start-up (exit 2, the flag and value named);
# a good one gets past the check (the command then fails later for want of a cluster, not for it).
bin="$1"
out=$("$bin" scheduler --adopt-hami-created-before yesterday 2>&1); rc=$?
[ "$rc" -eq 2 ] || { echo "exit $rc, want 2: $out"; exit 1; }
echo "$out" | grep -q -- '--adopt-hami-created-before "yesterday" is not a UTC time' ||
  { echo "no clear error: $out"; exit 1; }
# Shaped right but not a calendar time.
out=$("$bin" scheduler --adopt-hami-created-before 2026-13-40T10:00:00Z 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q 'is not a UTC time' ||
  { echo "month 13 accepted (exit $rc): $out"; exit 1; }
out=$("$bin" scheduler --adopt-hami-created-before 2026-12-04T10:00:00Z --kubeconfig /nonexistent 2>&1)
if echo "$out" | grep -q 'is not a UTC time'; then echo "good value refused: $out"; exit 1; fi
# --fragmentation-workload (issue 37 item 2): a file that is not an array of whole shapes whose
# popularities sum to 1 is refused at start-up, naming the flag; a good one gets past the check.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo '[{"cpu_milli":1000}]' > "$tmp/bad.json"
echo '[{"cpu_milli":1000,"gpu_milli":500,"num_gpus":1,"popularity":0.5}]' > "$tmp/half.json"
echo '[{"cpu_milli":1000,"gpu_milli":500,"num_gpus":1,"gpu_spec":"T4","popularity":1}]' > "$tmp/good.json"
for f in bad half missing; do
  out=$("$bin" scheduler --allow-unauthenticated --fragmentation-workload "$tmp/$f.json" 2>&1); rc=$?
  [ "$rc" -eq 2 ] && echo "$out" | grep -q -- "--fragmentation-workload $tmp/$f.json: " ||
    { echo "$f.json (exit $rc): $out"; exit 1; }
done
out=$("$bin" scheduler --allow-unauthenticated --fragmentation-workload "$tmp/good.json" \
  --kubeconfig /nonexistent 2>&1)
if echo "$out" | grep -q -- '--fragmentation-workload'; then echo "good file refused: $out"; exit 1; fi
# --node-lock=bind-phase without --signing-key-file is refused at start-up, naming both flags;
# with a key it gets past the check; a value that is not a mode is refused.
out=$("$bin" scheduler --allow-unauthenticated --node-lock=bind-phase 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--node-lock=bind-phase needs --signing-key-file' ||
  { echo "bind-phase without a key (exit $rc): $out"; exit 1; }
echo k > "$tmp/key"
out=$("$bin" scheduler --allow-unauthenticated --node-lock=bind-phase --signing-key-file "$tmp/key" \
  --kubeconfig /nonexistent 2>&1)
if echo "$out" | grep -q -- '--node-lock'; then echo "bind-phase with a key refused: $out"; exit 1; fi
out=$("$bin" scheduler --allow-unauthenticated --node-lock=pod 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--node-lock' ||
  { echo "--node-lock=pod (exit $rc): $out"; exit 1; }
echo ok
