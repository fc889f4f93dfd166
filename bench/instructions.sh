#!/usr/bin/env bash
# Instruction-count guard of the parse path (issue 34): counts the instructions of one
# `--once --threads 1` run over a fixed input with every path in it — a generated mixed log
# (bench/genlog.py, seed 7, 2 MiB: stats, access and request lines), the shipped samples
# (SGLang's variants, a PD decode session, the journal export's wrapped entries) — under
# valgrind's callgrind, and fails when the count is more than 10 % above the figure committed in
# bench/instructions.txt. A count is stable on a noisy machine where a time is not (the same
# binary, input and CPU features give the same count whatever else runs).
#
# Usage: bench/instructions.sh [--bin PATH] [--update]
#   --bin     the binary (default target/release/sglang-log-exporter, built if missing)
#   --update  write the count measured now into bench/instructions.txt (after a deliberate
#             change; say why in the commit)
# The count depends on the CPU's vector features (memchr and aho-corasick pick AVX2 or SSE2 at
# run time): on a CPU whose AVX2 support differs from the figure's, the count is printed and
# not judged.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
bin="" update=false
while (($#)); do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --update) update=true; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "needs valgrind (Debian package valgrind)" >&2; exit 2; }
if [[ -z "$bin" ]]; then
  bin="$root/target/release/sglang-log-exporter"
  [[ -x $bin ]] || (cd "$root" && cargo build --release --locked --quiet)
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 "$here/genlog.py" --size 2M --seed 7 --out "$dir/mixed.log" >/dev/null 2>&1
inputs=("$dir/mixed.log" "$root/samples/sglang-variants.log" "$root/samples/pd-decode-session.log"
  "$root/samples/journal-export.txt")
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
  "$bin" --once --gpu.disable --threads 1 --timezone UTC --log.level error "${inputs[@]}" \
  >"$dir/out.prom" 2>"$dir/valgrind.err" || {
  echo "the run under valgrind failed:" >&2
  tail -20 "$dir/valgrind.err" >&2
  exit 1
}
grep -q '^sglang:num_running_reqs{' "$dir/out.prom" || { echo "no exposition from the run" >&2; exit 1; }
count=$(grep -o 'Collected : [0-9]*' "$dir/valgrind.err" | grep -o '[0-9]*$')
avx2=no
grep -qw avx2 /proc/cpuinfo && avx2=yes
figures="$here/instructions.txt"
if $update; then
  printf 'instructions %s\navx2 %s\n' "$count" "$avx2" >"$figures"
  echo "instructions: $count (avx2 $avx2) written to $figures"
  exit 0
fi
want=$(awk '$1 == "instructions" { print $2 }' "$figures")
want_avx2=$(awk '$1 == "avx2" { print $2 }' "$figures")
pct=$(awk -v n="$count" -v w="$want" 'BEGIN { printf "%+.1f", (n - w) * 100 / w }')
echo "instructions: $count, committed $want ($pct %)"
if [[ $avx2 != "$want_avx2" ]]; then
  echo "this CPU's AVX2 support ($avx2) differs from the figure's ($want_avx2): not judged"
  exit 0
fi
if awk -v n="$count" -v w="$want" 'BEGIN { exit !(n > w * 1.10) }'; then
  echo "the parse path costs $pct % more instructions than committed (limit +10 %): find the cause" \
    "(callgrind_annotate), or if it is deliberate, run bench/instructions.sh --update and say why" >&2
  exit 1
fi
if awk -v n="$count" -v w="$want" 'BEGIN { exit !(n < w * 0.90) }'; then
  echo "note: $pct % below the committed figure: bench/instructions.sh --update keeps the gain guarded"
fi
