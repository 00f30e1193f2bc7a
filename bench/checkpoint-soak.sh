#!/usr/bin/env bash
# Checkpoint soak (issue 6): cairn against restic and borg on the identical
# sequence of states, in the same run.
#
# A session workspace (a few hundred small files) plus a disk image changed
# by a few random 4 KiB writes between saves. Before every save the state is
# mutated once; then cairn saves a checkpoint (workspace snapshot + the image
# as a named path), restic backs up the same two paths, and borg creates an
# archive of them. Each tool's wall time is summed over all saves; stored
# bytes are the size of each tool's store or repository on disk (`du -sb`).
#
# Environment (defaults are the issue's full scale):
#   SOAK_SAVES=80        number of states / saves per tool
#   SOAK_IMAGE_MB=256    size of the image
#   SOAK_FILES=300       small files in the workspace
#   SOAK_WRITES=8        random 4 KiB writes into the image between saves
#   SOAK_DIR=…           working directory (default: a new one in /var/tmp)
#   SOAK_KEEP=1          keep the working directory afterwards
#
# Needs root for apt-get when restic or borg is missing (Debian packages
# `restic` and `borgbackup`).
set -euo pipefail

SAVES=${SOAK_SAVES:-80}
IMAGE_MB=${SOAK_IMAGE_MB:-256}
FILES=${SOAK_FILES:-300}
WRITES=${SOAK_WRITES:-8}
REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)

# --- tools -------------------------------------------------------------------
missing=()
command -v restic >/dev/null || missing+=(restic)
command -v borg >/dev/null || missing+=(borgbackup)
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "checkpoint-soak: needs ${missing[*]}; run as root or install them" >&2
        exit 2
    fi
    echo "installing ${missing[*]} …" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "building cairn's soak helper (release) …" >&2
(cd "$REPO_ROOT" && cargo build --release -q -p cairn-checkpoint --example soak)
SOAK="$REPO_ROOT/target/release/examples/soak"

# --- data and repositories ----------------------------------------------------
WORK=${SOAK_DIR:-$(mktemp -d /var/tmp/cairn-soak.XXXXXX)}
mkdir -p "$WORK"
cleanup() { [[ -n ${SOAK_KEEP:-} ]] || rm -rf "$WORK"; }
trap cleanup EXIT
DATA="$WORK/data"
WS="$DATA/ws"
IMAGE="$DATA/disk.img"
CAIRN_STORE="$WORK/cairn-store"
RESTIC_REPO="$WORK/restic-repo"
BORG_REPO="$WORK/borg-repo"
rm -rf "$DATA" "$CAIRN_STORE" "$RESTIC_REPO" "$BORG_REPO" "$WORK/borg-home"
mkdir -p "$WS"

export RESTIC_PASSWORD=soak RESTIC_CACHE_DIR="$WORK/restic-cache"
export BORG_BASE_DIR="$WORK/borg-home"
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
RUN=soak

"$SOAK" gen --workspace "$WS" --files "$FILES" --image "$IMAGE" --mb "$IMAGE_MB"
restic init -q --repo "$RESTIC_REPO" >/dev/null
borg init --encryption none "$BORG_REPO"

now() { date +%s%N; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
t_cairn=0 t_restic=0 t_borg=0 logical=0
echo "soak: $SAVES saves of $FILES files + a ${IMAGE_MB} MiB image ($WRITES × 4 KiB writes between saves) in $WORK" >&2

cd "$DATA"
for ((i = 1; i <= SAVES; i++)); do
    if ((i > 1)); then
        "$SOAK" mutate --workspace "$WS" --image "$IMAGE" --writes "$WRITES" --seed "$i"
    fi
    sync
    # Logical bytes: the files' sizes (what a save without dedup would hold).
    state=$(find ws disk.img -type f -printf '%s\n' | awk '{s += $1} END {print s}')
    logical=$((logical + state))

    t0=$(now)
    "$SOAK" save --store "$CAIRN_STORE" --run "$RUN" --workspace "$WS" --path "$IMAGE" >/dev/null
    t1=$(now)
    restic -q --repo "$RESTIC_REPO" backup --compression auto --host soak ws disk.img >/dev/null
    t2=$(now)
    borg create --compression zstd "$BORG_REPO::s$i" ws disk.img
    t3=$(now)
    t_cairn=$((t_cairn + t1 - t0))
    t_restic=$((t_restic + t2 - t1))
    t_borg=$((t_borg + t3 - t2))
    if ((i % 10 == 0 || i == SAVES)); then
        printf '  %3d/%d saved  (cairn %.1f s, restic %.1f s, borg %.1f s so far)\n' "$i" "$SAVES" \
            "$(div "$t_cairn" 1e9)" "$(div "$t_restic" 1e9)" "$(div "$t_borg" 1e9)" >&2
    fi
done
cd "$WORK"

"$SOAK" verify --store "$CAIRN_STORE" --run "$RUN" --last >&2
stats=$("$SOAK" stats --store "$CAIRN_STORE" --run "$RUN")

s_cairn=$(du -sb "$CAIRN_STORE" | cut -f1)
s_restic=$(du -sb "$RESTIC_REPO" | cut -f1)
s_borg=$(du -sb "$BORG_REPO" | cut -f1)

echo
echo "checkpoint soak: $SAVES states of ($FILES files + ${IMAGE_MB} MiB image, $WRITES × 4 KiB writes between states)"
echo "$(restic version | head -1); $(borg --version)"
printf '%-8s %16s %16s %10s %10s %12s\n' tool logical_bytes stored_bytes dedup time_s s/save
row() {
    printf '%-8s %16d %16d %9.1fx %10.2f %12.3f\n' "$1" "$logical" "$2" \
        "$(div "$logical" "$2")" "$(div "$3" 1e9)" "$(div "$3" "${SAVES}e9")"
}
row cairn "$s_cairn" "$t_cairn"
row restic "$s_restic" "$t_restic"
row borg "$s_borg" "$t_borg"
echo "cairn stats (objects only, from its manifests): $stats"
echo
"$SOAK" throughput "$IMAGE"
echo
verdict() { if (($2)); then echo "  ok    $1"; else echo "  MISS  $1"; fi; }
echo "targets:"
verdict "cairn stored <= restic stored" $((s_cairn <= s_restic))
verdict "cairn stored <= borg stored" $((s_cairn <= s_borg))
verdict "cairn time <= restic time" $((t_cairn <= t_restic))
