#!/usr/bin/env bash
# Workspace capture against git on the same trees (issue 5), in one run:
#   first capture          vs  git add -A && git write-tree   (fresh store / fresh repo each round)
#   unchanged capture      vs  git status --porcelain         (after the tree was captured / committed)
#   one changed file       vs  git add -A                     (the same file rewritten for both)
#   and single-core SHA-256 over the same bytes.
# Trees: 20,000 files (~200 MB) and 50,000 files (~500 MB), page cache warm.
#
#   CAIRN_BENCH_SCALE=0.1   smaller trees for a quick run (default 1)
#   CAIRN_BENCH_ROUNDS=5    rounds per figure; medians are printed (default 3)
#   CAIRN_BENCH_DIR=DIR     where the trees, stores and repos go (default: a temp dir)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
scale=${CAIRN_BENCH_SCALE:-1}
rounds=${CAIRN_BENCH_ROUNDS:-3}
work=${CAIRN_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
cleanup() { [ -z "${CAIRN_BENCH_DIR:-}" ] && rm -rf "$work"; }
trap cleanup EXIT

cargo build --release -q --manifest-path "$repo/Cargo.toml" -p cairn-workspace --example capture
bin="$repo/target/release/examples/capture"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid

now_ms() { date +%s%N | awk '{printf "%.1f", $1/1000000}'; }
# time_ms CMD...: wall-clock milliseconds of a command, output discarded.
time_ms() { local a b; a=$(date +%s%N); "$@" >/dev/null 2>&1; b=$(date +%s%N); awk -v a="$a" -v b="$b" 'BEGIN{printf "%.1f", (b-a)/1000000}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }
git_in() { local gd=$1; shift; git --git-dir="$gd" --work-tree="$tree" -c gc.auto=0 "$@"; }

echo "cairn workspace benchmark: scale $scale, $rounds rounds, medians; $(nproc) cores; $(git --version)"
printf '%-8s %-8s | %-22s | %-22s | %-22s | %s\n' files MB "first: cairn/git ms" "unchanged: cairn/git" "one change: cairn/git" "sha256 1-core ms (MB/s)"

for spec in "20000 200" "50000 500"; do
  set -- $spec
  files=$(awk -v n="$1" -v s="$scale" 'BEGIN{printf "%d", n*s}')
  mb=$(awk -v n="$2" -v s="$scale" 'BEGIN{printf "%d", n*s}')
  tree="$work/tree-$files"
  rm -rf "$tree"
  "$bin" gen "$tree" "$files" "$((mb * 1000000))" >/dev/null

  # SHA-256, single core, over the same bytes.
  sha=(); mbps=()
  for r in $(seq "$rounds"); do
    out=$("$bin" sha "$tree"); sha+=("$(echo "$out" | cut -d' ' -f1)"); mbps+=("${out##*MBps=}")
  done

  # First capture vs git add -A && git write-tree.
  first=(); gfirst=()
  for r in $(seq "$rounds"); do
    rm -rf "$work/store" "$work/git"
    first+=("$(time_ms "$bin" snap "$work/store" "$tree" "snap:1")")
    git init -q --bare "$work/git"
    gfirst+=("$(time_ms bash -c "git --git-dir='$work/git' --work-tree='$tree' -c gc.auto=0 add -A && git --git-dir='$work/git' --work-tree='$tree' write-tree")")
  done
  git_in "$work/git" commit -q -m tree

  # Unchanged: the store and the repo from the last round above.
  sleep 2.2   # let the racy window of the last capture pass, as it would between real boundaries
  "$bin" snap "$work/store" "$tree" "snap:2" >/dev/null
  same=(); gsame=()
  for r in $(seq "$rounds"); do
    same+=("$(time_ms "$bin" snap "$work/store" "$tree" "snap:$((r + 2))")")
    gsame+=("$(time_ms git_in "$work/git" status --porcelain)")
  done

  # One changed file: the same rewrite seen by both.
  one=(); gone=()
  for r in $(seq "$rounds"); do
    "$bin" touch "$tree" "$((r * 7 % files))" >/dev/null
    one+=("$(time_ms "$bin" snap "$work/store" "$tree" "snap:$((r + 100))")")
    gone+=("$(time_ms git_in "$work/git" add -A)")
  done

  f=$(median "${first[@]}"); gf=$(median "${gfirst[@]}")
  s=$(median "${same[@]}"); gs=$(median "${gsame[@]}")
  o=$(median "${one[@]}"); go=$(median "${gone[@]}")
  h=$(median "${sha[@]}"); hm=$(median "${mbps[@]}")
  printf '%-8s %-8s | %8s / %-8s %5s | %7s / %-7s %5s | %7s / %-7s %5s | %s (%s)\n' \
    "$files" "$mb" "$f" "$gf" "$(ratio "$f" "$gf")" "$s" "$gs" "$(ratio "$s" "$gs")" \
    "$o" "$go" "$(ratio "$o" "$go")" "$h" "$hm"
  echo "         first capture / single-core SHA-256 = $(ratio "$f" "$h")x"
  rm -rf "$tree" "$work/store" "$work/git"
done
echo "(ratios are cairn/git: below 1.00 cairn is faster; times include process start-up for both)"
