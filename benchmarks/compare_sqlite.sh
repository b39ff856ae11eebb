#!/usr/bin/env bash
# foreperson (SQLite) next to huey (SQLite), same machine, same run; prints ratios.
#   W1: 10,000 no-op tasks, 8 workers, durable (synchronous=FULL): tasks/s, target >= huey
#   W2: 2,000 x 50 ms at 8 / 32 / 64 workers: drain / ideal, target <= 1.05
#   nightly: seed 000's job scaled down (2,000 tickets x 6.2 ms at 8 and 64 workers)
# Usage: bash benchmarks/compare_sqlite.sh [PEERS_DIR]   (default ../shared/peers)
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${1:-../shared/peers}
PY=${PY:-python3}
out=$(mktemp)
run() { "$@" | grep '^{' | tee -a "$out"; }

run $PY benchmarks/bench_sqlite.py 10000 0 8
run $PY "$PEERS/bench_huey.py" 10000 0 8
for c in 8 32 64; do
    run $PY benchmarks/bench_sqlite.py 2000 50 $c
    run $PY "$PEERS/bench_huey.py" 2000 50 $c
done
run $PY benchmarks/bench_nightly.py 2000 8 64

$PY - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def find(peer, n, workers):
    return next(r for r in rows if r.get("peer", "").startswith(peer) and r["n"] == n
                and r["workers"] == workers)
ours, huey = find("foreperson", 10000, 8), find("huey", 10000, 8)
print(f"W1 tasks/s: foreperson {ours['process_per_s']}, huey {huey['process_per_s']}, "
      f"ratio {ours['process_per_s'] / huey['process_per_s']:.2f} (target >= 1)")
for c in (8, 32, 64):
    o, h = find("foreperson", 2000, c), find("huey", 2000, c)
    print(f"W2 {c:>2} workers drain/ideal: foreperson {o['process_s'] / o['ideal_s']:.3f}, "
          f"huey {h['process_s'] / h['ideal_s']:.3f} (target <= 1.05)")
for r in rows:
    if r.get("bench") == "nightly":
        print(f"nightly {r['shape']:<11} {r['workers']:>2} workers: efficiency "
              f"{r['efficiency']:.2f} ({r['tickets_per_s']} tickets/s)")
PY
