#!/bin/sh
# The many-core run of bench/RESULTS.md "Many cores", from an unpacked bundle (bench/bundle.sh
# copies this script into it): ./many_cores.sh OUTDIR [SCALE [STAGES]]. Each benchmark writes
# its own file in OUTDIR as it goes and has its own time limit, so one that hangs leaves the
# others' figures. SCALE (default 1) multiplies the durations: 0.1 for a dry run of the exact
# commands. STAGES (default "flushes peers cores juicefs fronts", run in that order) picks the benchmarks; juicefs (1, 2
# and 3 daemons on JuiceFS mounts, bench/cluster_throughput.py) runs where the bundle carries
# the juicefs binary and the machine lets root mount FUSE.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: many_cores.sh OUTDIR [SCALE]}
SCALE=${2:-1}
STAGES=${3:-flushes peers cores juicefs fronts}
mkdir -p "$OUT"
scaled() { python3 -c "import sys; print(max(float(sys.argv[2]), float(sys.argv[1]) * $SCALE))" "$1" "${2:-0.5}"; }
ops() { python3 -c "print(max(300, int($1 * $SCALE)))"; }
{ date -u; uname -a; echo "cores: $(nproc)"; free -g; df -T /var/tmp; python3 --version
  ls -l /dev/fuse; } >"$OUT/machine.txt" 2>&1
stage() {  # stage NAME LIMIT_SECONDS ARGS...: run.sh ARGS under a time limit, into OUT/NAME.txt
    name=$1 limit=$2; shift 2
    case " $STAGES " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name: $* ($(date -u +%T))"
    PYTHONUNBUFFERED=1 timeout -k 10 "$limit" "$HERE/run.sh" "$@" >"$OUT/$name.txt" 2>&1
    echo "   exit $? ($(date -u +%T))"
}
stage flushes 60 add_flushes --rounds 3 --sizes 1,16,64 --batches "$(ops 150)"
stage peers 300 peers --rounds 2 --seconds "$(scaled 4)" --connections 64
stage cores 150 cores --ops "$(ops 20000)" --rounds 1 --workers auto --hot-queue \
    --variant "auto||" --variant "auto, flush group||--flush-group" \
    --variant "8 fronts||--fronts 8" --variant "8 fronts, flush group||--fronts 8 --flush-group" \
    --variant "auto, front on asyncio||--event-loop asyncio"
if [ -e "$HERE/juicefs.xz" ] && [ ! -x "$HERE/bin/juicefs" ]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
        "$HERE/juicefs.xz" "$HERE/bin/juicefs" && chmod +x "$HERE/bin/juicefs"
fi
stage juicefs 120 cluster_throughput juicefs --seconds "$(scaled 6 1)" --clients 16 --daemons 1,2,3
stage fronts 120 fronts --fronts 1,2,4,8 --rounds 2 --seconds "$(scaled 3)" --workers auto --access-log
