#!/usr/bin/env bash
# Whole-machine checkpoints (issue 17, DESIGN §13): cairn against the naive
# way to save a running qemu guest, measured in the same run on the same
# guests.
#
# 1. Pause and save time, 256 MiB and 1 GiB guests with a 1 GiB disk, each
#    running light work (a counter written to its disk every 0.2 s):
#    `cairn checkpoint save` (pause, overlay, memory stream, continue, then
#    chunk) against the naive save over QMP (stop, migrate to a file, copy
#    the whole disk with qemu-img, continue). Medians of SAVES saves each.
# 2. Restore to first guest output: SIGKILL qemu, `cairn checkpoint
#    restore`, until the restored guest prints its next line; against a cold
#    `cairn vm start` to the guest's first line. Medians of RESTORES.
# 3. CHECKPOINTS checkpoints of a 256 MiB guest doing light work, one after
#    the other: stored bytes against logical bytes (KeepState: 19.1x over 82
#    checkpoints; target >= 20x), and the time per checkpoint.
#
# Environment:
#   VM_BENCH_SAVES=5 VM_BENCH_RESTORES=3 VM_BENCH_CHECKPOINTS=80
#   VM_BENCH_DIR=…       working directory (default: a new one in /var/tmp)
#   CAIRN_VM_KERNEL=DIR  the guest kernel (default: target/vm-cache/kernel,
#                        fetched with crates/cairn/tests/vm/fetch-kernel.sh)
# Needs what the VM tests need: qemu-system-x86, qemu-utils, busybox-static,
# e2fsprogs (see the README's "Whole-machine sessions").
set -euo pipefail

SAVES=${VM_BENCH_SAVES:-5}
RESTORES=${VM_BENCH_RESTORES:-3}
CHECKPOINTS=${VM_BENCH_CHECKPOINTS:-80}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CAIRN_VM_KERNEL=${CAIRN_VM_KERNEL:-$ROOT/target/vm-cache/kernel}
if [[ ! -f $CAIRN_VM_KERNEL/vmlinuz ]]; then
    sh "$ROOT/crates/cairn/tests/vm/fetch-kernel.sh" "$CAIRN_VM_KERNEL"
fi

echo "building cairn (release) …" >&2
(cd "$ROOT" && cargo build --release -q -p cairn)
CAIRN=$ROOT/target/release/cairn

WORK=${VM_BENCH_DIR:-$(mktemp -d /var/tmp/cairn-vm-bench.XXXXXX)}
mkdir -p "$WORK"
export CAIRN_STORE=$WORK/store
cleanup() {
    for p in "$CAIRN_STORE"/machines/*/qemu.pid; do
        [[ -f $p ]] && kill -9 "$(cat "$p")" 2>/dev/null || true
    done
    [[ -n ${VM_BENCH_KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

COUNTER='i=0; while :; do i=$((i+1)); echo $i > count; sync; echo "count $i"; sleep 0.2; done'

now() { date +%s.%N; }
calc() { awk "BEGIN { print $* }"; }
field() { python3 -c "import json,sys; v=json.load(sys.stdin); print(v$1)"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
lines_in() { grep -c '^count ' "$1" 2>/dev/null || true; }

# Waits until console $1 has more than $2 counter lines (at most 300 s).
wait_lines() {
    local deadline=$((SECONDS + 300))
    while (($(lines_in "$1") <= $2)); do
        ((SECONDS < deadline)) || { echo "the guest printed nothing on $1" >&2; exit 1; }
        sleep 0.02
    done
}

# The naive save over QMP: stop; migrate to a file; copy the whole disk
# (its backing chain flattened) while stopped; cont. Prints the pause.
naive_save() {
    python3 - "$1" "$2" <<'EOF'
import json, socket, subprocess, sys, time
sock_path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.connect(sock_path)
f = s.makefile("rw")
def cmd(name, args=None):
    f.write(json.dumps({"execute": name, "arguments": args or {}}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r: return r["return"]
        if "error" in r: sys.exit(f"{name}: {r['error']}")
json.loads(f.readline())
cmd("qmp_capabilities")
cmd("migrate-set-parameters", {"max-bandwidth": 1 << 40})
disk = [b for b in cmd("query-block") if b.get("inserted")][0]["inserted"]["file"]
t0 = time.monotonic()
cmd("stop")
cmd("migrate", {"uri": f"exec:cat > {out}.memory"})
while cmd("query-migrate").get("status") not in ("completed", "failed"):
    time.sleep(0.005)
subprocess.run(["qemu-img", "convert", "-U", "-O", "raw", disk, f"{out}.disk"], check=True)
cmd("cont")
print(f"{time.monotonic() - t0:.3f}")
EOF
}

start_guest() { # memory; prints "ID CONSOLE"
    "$CAIRN" vm start --memory "$1" --disk-size 1G --json -- "$COUNTER" |
        python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["id"], v["console"])'
}

echo
echo "1. pause and save time (guest with a 1 GiB disk, light work; median of $SAVES)"
printf '   %-7s %14s %14s %14s %14s %9s %9s\n' memory "cairn pause s" "naive pause s" "cairn save s" "naive save s" "pause n/c" "save n/c"
for mem in 256M 1G; do
    read -r id console < <(start_guest "$mem")
    wait_lines "$console" 3
    cp_pauses=() cp_saves=() nv_pauses=() nv_saves=()
    for _ in $(seq "$SAVES"); do
        t0=$(now)
        out=$("$CAIRN" checkpoint save "$id" --json)
        t1=$(now)
        cp_pauses+=("$(echo "$out" | field '["paused_secs"]')")
        cp_saves+=("$(calc "$t1 - $t0")")
        t0=$(now)
        nv_pauses+=("$(naive_save "$CAIRN_STORE/machines/$id/qmp.sock" "$WORK/naive")")
        t1=$(now)
        nv_saves+=("$(calc "$t1 - $t0")")
        rm -f "$WORK"/naive.*
    done
    cp_p=$(printf '%s\n' "${cp_pauses[@]}" | median)
    nv_p=$(printf '%s\n' "${nv_pauses[@]}" | median)
    cp_s=$(printf '%s\n' "${cp_saves[@]}" | median)
    nv_s=$(printf '%s\n' "${nv_saves[@]}" | median)
    printf '   %-7s %14.3f %14.3f %14.3f %14.3f %9.1f %9.2f\n' "$mem" "$cp_p" "$nv_p" "$cp_s" "$nv_s" \
        "$(calc "$nv_p / $cp_p")" "$(calc "$nv_s / $cp_s")"
    "$CAIRN" vm stop "$id" >/dev/null
done

echo
echo "2. restore to first guest output (256 MiB guest, 1 GiB disk; median of $RESTORES)"
boots=() restores=()
for _ in $(seq "$RESTORES"); do
    t0=$(now)
    read -r id console < <(start_guest 256M)
    wait_lines "$console" 0
    t1=$(now)
    boots+=("$(calc "$t1 - $t0")")
    wait_lines "$console" 3
    cp=$("$CAIRN" checkpoint save "$id" --json | field '["id"]')
    kill -9 "$(cat "$CAIRN_STORE/machines/$id/qemu.pid")"
    sleep 0.5
    t0=$(now)
    new_console=$("$CAIRN" checkpoint restore "$cp" --json | field '["console"]')
    wait_lines "$new_console" 0
    t1=$(now)
    restores+=("$(calc "$t1 - $t0")")
    "$CAIRN" vm stop "$id" >/dev/null
done
boot=$(printf '%s\n' "${boots[@]}" | median)
restore=$(printf '%s\n' "${restores[@]}" | median)
printf '   cold start to first output   %8.3f s\n' "$boot"
printf '   restore to first output      %8.3f s   restore/boot = %.2f\n' "$restore" "$(calc "$restore / $boot")"

echo
echo "3. $CHECKPOINTS checkpoints of a running 256 MiB guest (1 GiB disk, light work)"
read -r id console < <(start_guest 256M)
wait_lines "$console" 3
logical=0 stored=0 memory=0 times=()
for _ in $(seq "$CHECKPOINTS"); do
    t0=$(now)
    out=$("$CAIRN" checkpoint save "$id" --json)
    t1=$(now)
    times+=("$(calc "$t1 - $t0")")
    logical=$((logical + $(echo "$out" | field '["logical_bytes"]')))
    stored=$((stored + $(echo "$out" | field '["stored_bytes"]')))
    memory=$((memory + $(echo "$out" | field '["memory_bytes"]')))
done
per=$(printf '%s\n' "${times[@]}" | median)
objects=$(du -sb "$CAIRN_STORE/objects" | cut -f1)
printf '   logical bytes                %14d  (memory streams %d)\n' "$logical" "$memory"
printf '   stored bytes (new, summed)   %14d\n' "$stored"
printf '   object pool on disk (du)     %14d\n' "$objects"
printf '   logical/stored = %.1f   logical/du = %.1f   (KeepState 19.1; target >= 20)\n' \
    "$(calc "$logical / $stored")" "$(calc "$logical / $objects")"
printf '   memory streams/du = %.1f   (the disk left out: its unused blocks are zeros)\n' \
    "$(calc "$memory / $objects")"
printf '   time per checkpoint (median) %8.3f s\n' "$per"
"$CAIRN" vm stop "$id" >/dev/null
