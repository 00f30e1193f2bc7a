#!/usr/bin/env bash
# cairn's demonstration: no API key, no network. A scripted agent fixes a bug
# in a scratch workspace; the demo kills it with SIGKILL in the middle of a
# tool call, lists the session, resumes it (the in-flight call is recorded as
# `unknown` and NOT re-run), prints the journal and verifies its hash chain,
# rewinds the workspace to before the fix, then shows that a tampered copy
# fails verification.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
echo "== building cairn"
cargo build --quiet -p cairn
cairn="${CARGO_TARGET_DIR:-$PWD/target}/debug/cairn"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cairn-demo.XXXXXX")
export CAIRN_STORE="$scratch/store"
ws="$scratch/workspace"
cp -R "$here/workspace" "$ws"
cd "$ws"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. cairn run: the agent works; we SIGKILL it during its slow test run"
CAIRN_SCRIPT_DELAY_MS=15 "$cairn" run --model "script:$here/session.json" \
  --name "fix calc" "Fix the failing test" &
pid=$!
for _ in $(seq 1 600); do [ -f .suite-runs ] && break; sleep 0.05; done
sleep 0.3
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "(killed cairn, pid $pid, while 'sleep 4; sh test.sh' was running)"
id=$(ls "$CAIRN_STORE/runs")

step "2. cairn sessions: the killed session is listed as running (no terminal record)"
"$cairn" sessions

step "3. cairn resume $id: finishes the cut-short turn without repeating its effect"
"$cairn" resume "$id"
echo "the suite's side effect ran $(wc -l < .suite-runs) time(s) (the killed run), never twice"

step "4. the journal: every turn and tool result, hash-chained"
"$cairn" session show "$id" --transcript

step "5. cairn verify"
"$cairn" verify "$id"

step "6. the workspace was versioned at every turn: list the snapshots, undo turn 4's fix"
"$cairn" rewind "$id" --list-snapshots
"$cairn" rewind "$id" --to turn:4
echo "calc.sh is back to:"; grep -n '\$((' calc.sh
echo "(the rewind banked the state it replaced: 'cairn rewind $id --restore-snapshot BANK' puts it back)"

step "7. a tampered copy of the store fails verification (exit 3)"
cp -R "$CAIRN_STORE" "$scratch/tampered"
sed -i '0,/list_dir/s//list_DIR/' "$scratch/tampered/runs/$id/journal.jsonl"
set +e
"$cairn" --store "$scratch/tampered" verify "$id"
echo "exit status: $?"
set -e

step "done: the store is $CAIRN_STORE (delete $scratch when finished)"
