#!/usr/bin/env bash
# foreperson on PostgreSQL side by side with pgqueuer and procrastinate, in one run on one
# machine (the peer scripts live in /work/shared/peers; see its README). Prints a table
# with ratios; the raw JSON lines go to $PEER_WORKDIR/compare_postgres.jsonl.
#
#   W1  10,000 no-op tasks, 8 workers, durable defaults (synchronous_commit on):
#       drain tasks/s; target: foreperson >= 2x pgqueuer
#   W2  2,000 tasks x 50 ms at 8 / 32 / 64 workers: drain time / ideal (n x 50 ms / C);
#       target: foreperson <= 1.10
#   crash  20 tasks of 1.5 s, SIGKILL the worker mid-run, a second worker drains:
#       lost / completed twice / time to recover (foreperson: benchmarks/crash_postgres.py)
#
# Environment: PEER_PY (python), PEERS_DIR (default /work/shared/peers), PEER_PG
# (default postgresql://postgres@127.0.0.1:5432), PGDB (default bench, created if
# missing), PEER_WORKDIR (scratch folder), ROUNDS (W1 repetitions, default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PEER_PY:-python3}
PEERS=${PEERS_DIR:-/work/shared/peers}
export PGDB=${PGDB:-bench}
export PEER_WORKDIR=${PEER_WORKDIR:-${TMPDIR:-/tmp}/peers}
ROUNDS=${ROUNDS:-1}
mkdir -p "$PEER_WORKDIR"
OUT=$PEER_WORKDIR/compare_postgres.jsonl
ERR=$PEER_WORKDIR/compare_postgres.stderr
: > "$OUT"
: > "$ERR"
PGURL=${PEER_PG:-postgresql://postgres@127.0.0.1:5432}
psql "$PGURL/postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname = '$PGDB'" | grep -q 1 \
    || psql "$PGURL/postgres" -qc "CREATE DATABASE $PGDB"

run() {
    echo "### $*" >&2
    timeout 900 "$@" 2>>"$ERR" | grep '^{' >> "$OUT" || echo "    (failed: see $ERR)" >&2
}

for _ in $(seq "$ROUNDS"); do
    run "$PY" benchmarks/bench_postgres.py 10000 0 8
    run "$PY" "$PEERS/bench_pgqueuer.py" 10000 0 8
    run "$PY" "$PEERS/bench_procrastinate.py" 10000 0 8
done
for C in 8 32 64; do
    run "$PY" benchmarks/bench_postgres.py 2000 50 "$C"
    run "$PY" "$PEERS/bench_pgqueuer.py" 2000 50 "$C"
    run "$PY" "$PEERS/bench_procrastinate.py" 2000 50 "$C"
done
run "$PY" benchmarks/crash_postgres.py
run "$PY" "$PEERS/crash_test.py" pgqueuer
run "$PY" "$PEERS/crash_test.py" procrastinate

"$PY" - "$OUT" <<'EOF'
import ast, collections, json, statistics, sys

rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    try:
        rows.append(json.loads(line))
    except ValueError:
        rows.append(ast.literal_eval(line))     # crash_test.py prints a Python dict

def name(r):
    return r["peer"].removesuffix("-pg")

print("\nW1: 10,000 no-op tasks, 8 workers, durable (drain tasks/s)")
w1 = collections.defaultdict(list)
for r in rows:
    if r.get("n") == 10000 and r.get("sleep_ms") == 0:
        w1[name(r)].append(r["process_per_s"] if r.get("ok") else 0)
med = {p: statistics.median(v) for p, v in w1.items()}
base = med.get("pgqueuer")
for p, v in med.items():
    ratio = f"{v / base:.2f}x pgqueuer" if base else ""
    print(f"  {p:14s} {v:8.0f}/s  {ratio}   (runs: {w1[p]})")
if base and "foreperson" in med:
    print(f"  target foreperson >= 2x pgqueuer: {'MET' if med['foreperson'] >= 2 * base else 'NOT MET'}")

print("\nW2: 2,000 x 50 ms (drain / ideal)")
for c in (8, 32, 64):
    cells = []
    for r in rows:
        if r.get("n") == 2000 and r.get("sleep_ms") == 50 and r.get("workers") == c:
            ratio = r["process_s"] / r["ideal_s"] if r.get("ok") else float("inf")
            cells.append(f"{name(r)} {ratio:.2f}")
    print(f"  C={c:<3d} " + "   ".join(cells))
ours = [r["process_s"] / r["ideal_s"] for r in rows
        if r.get("n") == 2000 and r.get("peer") == "foreperson-pg"]
if ours:
    print(f"  target foreperson <= 1.10: {'MET' if max(ours) <= 1.10 else 'NOT MET'}"
          f" (worst {max(ours):.2f})")

print("\ncrash: 20 tasks of 1.5 s, SIGKILL mid-run")
for r in rows:
    if "tasks" in r:
        extra = ""
        if "reclaim_s" in r:
            extra = (f", reclaimed after {r['reclaim_s']} s (lease {r['stale_after_s']} s "
                     f"+ sweep {r['sweep_every_s']:.1f} s), no user-written sweeper")
        print(f"  {r['peer']:14s} lost {r['never_completed']}, completed twice "
              f"{r['completed_twice_or_more']}, recovery {r['recovery_wall_s']} s{extra}")
EOF
