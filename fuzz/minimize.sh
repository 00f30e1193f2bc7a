#!/bin/sh
# Minimizes fuzz/corpus/<target>/ to a set cover of its edges (no hit
# counts), keeping every seed-* file: smaller than `cargo fuzz cmin`, which
# keeps every input adding a feature. Build first with
# `cargo +nightly fuzz build -O -a <target>`.
set -eu
target=$1
cd "$(dirname "$0")"
bin=target/x86_64-unknown-linux-gnu/release/$target
corpus=corpus/$target
new=$(mktemp -d)
cp "$corpus"/seed-* "$new"/ 2>/dev/null || true
"$bin" -merge=1 -set_cover_merge=1 -use_counters=0 -rss_limit_mb=2048 "$new" "$corpus"
rm -rf "$corpus"
mv "$new" "$corpus"
chmod 755 "$corpus"
echo "$corpus: $(ls "$corpus" | wc -l) files, $(du -sh "$corpus" | cut -f1)"
