#!/usr/bin/env bash
# Workspace capture against git on the same trees (issue 5), in one run:
#   first capture          vs  git add -A && git write-tree   (fresh store / fresh repo each round)
#   unchanged capture      vs  git status --porcelain         (after the tree was captured / committed)
#   one changed file       vs  git add -A                     (the same file rewritten for both)
#   and, over the same bytes: SHA-256 on one core and on all cores, and the
#   floor of any one-file-per-object store (a new file per file, no hashing,
#   no compression, no fsync; DESIGN §1 keeps one file per object).
# Trees: 20,000 files (~200 MB) and 50,000 files (~500 MB), page cache warm.
#
# Before each timed step that follows heavy writing, `sync` flushes what the
# previous step left in the page cache, so neither tool's fsyncs wait behind
# the other's writeback. Every round writes into a store and a repository of
# its own, and nothing is deleted until the end: on ext4 without a journal, inodes freed in the
# last minutes are skipped one by one when files are created, which would
# charge whichever tool runs next for the previous one's cleanup.
#
#   CAIRN_BENCH_SCALE=0.1   smaller trees for a quick run (default 1)
#   CAIRN_BENCH_ROUNDS=5    rounds per figure (3x as many for the two cheap captures);
#                           medians are printed (default 3)
#   CAIRN_BENCH_DIR=DIR     where the trees, stores and repos go (default: a temp dir,
#                           removed at the end; a DIR given is left for you to remove)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
scale=${CAIRN_BENCH_SCALE:-1}
rounds=${CAIRN_BENCH_ROUNDS:-3}
work=${CAIRN_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
cleanup() { if [ -z "${CAIRN_BENCH_DIR:-}" ]; then rm -rf "$work"; fi; }
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
run_id=$$

for spec in "20000 200" "50000 500"; do
  set -- $spec
  files=$(awk -v n="$1" -v s="$scale" 'BEGIN{printf "%d", n*s}')
  mb=$(awk -v n="$2" -v s="$scale" 'BEGIN{printf "%d", n*s}')
  base="$work/$run_id-$files"
  tree="$base-tree"
  "$bin" gen "$tree" "$files" "$((mb * 1000000))" >/dev/null

  # SHA-256 over the same bytes, on one core and on all; the file floor.
  sha=(); mbps=(); shaall=(); floor=()
  for r in $(seq "$rounds"); do
    out=$("$bin" sha "$tree"); sha+=("$(echo "$out" | cut -d' ' -f1)"); mbps+=("${out##*MBps=}")
    shaall+=("$("$bin" sha "$tree" all | cut -d' ' -f1)")
    floor+=("$("$bin" floor "$tree" "$base-floor-$r" | cut -d' ' -f1)")
  done

  # First capture vs git add -A && git write-tree.
  first=(); gfirst=()
  for r in $(seq "$rounds"); do
    store="$base-store-$r"; gitd="$base-git-$r"
    sync   # each tool starts with nothing of the other's left to write back
    first+=("$(time_ms "$bin" snap "$store" "$tree" "snap:1")")
    git init -q --bare "$gitd"
    sync
    gfirst+=("$(time_ms bash -c "git --git-dir='$gitd' --work-tree='$tree' -c gc.auto=0 add -A && git --git-dir='$gitd' --work-tree='$tree' write-tree")")
  done
  git_in "$gitd" commit -q -m tree

  # Unchanged: the store and the repo from the last round above.
  sync        # the first captures' data is on disk: no writeback competes
  sleep 2.2   # let the racy window of the last capture pass, as it would between real boundaries
  "$bin" snap "$store" "$tree" "snap:2" >/dev/null
  same=(); gsame=()
  for r in $(seq "$((rounds * 3))"); do
    same+=("$(time_ms "$bin" snap "$store" "$tree" "snap:$((r + 2))")")
    gsame+=("$(time_ms git_in "$gitd" status --porcelain)")
  done

  # One changed file: the same rewrite seen by both.
  one=(); gone=()
  for r in $(seq "$((rounds * 3))"); do
    "$bin" touch "$tree" "$((r * 7 % files))" >/dev/null
    one+=("$(time_ms "$bin" snap "$store" "$tree" "snap:$((r + 100))")")
    gone+=("$(time_ms git_in "$gitd" add -A)")
  done

  f=$(median "${first[@]}"); gf=$(median "${gfirst[@]}")
  s=$(median "${same[@]}"); gs=$(median "${gsame[@]}")
  o=$(median "${one[@]}"); go=$(median "${gone[@]}")
  h=$(median "${sha[@]}"); hm=$(median "${mbps[@]}")
  ha=$(median "${shaall[@]}"); fl=$(median "${floor[@]}")
  printf '%-8s %-8s | %8s / %-8s %5s | %7s / %-7s %5s | %7s / %-7s %5s | %s (%s)\n' \
    "$files" "$mb" "$f" "$gf" "$(ratio "$f" "$gf")" "$s" "$gs" "$(ratio "$s" "$gs")" \
    "$o" "$go" "$(ratio "$o" "$go")" "$h" "$hm"
  echo "         first capture / SHA-256: one core $(ratio "$f" "$h")x, all cores ($ha ms) $(ratio "$f" "$ha")x;" \
    "file floor $fl ms: first capture / floor $(ratio "$f" "$fl")x, floor / one-core SHA-256 $(ratio "$fl" "$h")x"
done
echo "(ratios are cairn/git: below 1.00 cairn is faster; times include process start-up for both)"
