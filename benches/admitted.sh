#!/usr/bin/env bash
# What each admitted request leaves in the gateway's memory (issue 31): Tollgate on SQLite +
# in-process counters and on Postgres + Redis (when they answer), the bench account on a plan
# with an hourly limit too high to reach (as in load.sh), chat completions at full speed on 64
# connections for ADMITTED_SECS (8 s) a round, ADMITTED_ROUNDS (4) rounds, the backends taking
# turns. A rate limit's log holds what its window counts for as long as it counts it, so
# resident memory that grows with the requests admitted (not with the time or the connections)
# is the limiter's: the first round warms the process up, the growth from its end to the last
# round's, over the requests in between, is the figure. Prints one markdown table.
# Loopback only; bounded (about a minute and a half).
set -euo pipefail
cd "$(dirname "$0")/.."
ADMITTED_SECS=${ADMITTED_SECS:-8} ADMITTED_ROUNDS=${ADMITTED_ROUNDS:-4}

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup no-nginx
start_fakes 50 10
start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
backends=(sqlite)
if psql -h 127.0.0.1 -U postgres -qc "SELECT 1" >/dev/null 2>&1 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  PGDB="tollgate_admitted_$$"
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $PGDB" >/dev/null
  start_tollgate tg_pg "$TG2" "postgres://postgres@127.0.0.1:5432/$PGDB" "redis://127.0.0.1:6379/"
  backends+=(pg)
else
  echo "Postgres or Redis does not answer: SQLite only" >&2
fi
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
declare -A first_rss first_n total last_rss
for round in $(seq 1 "$ADMITTED_ROUNDS"); do
  for b in "${backends[@]}"; do
    if [ "$b" = sqlite ]; then pid=$tg_sqlite_pid key=$tg_sqlite_key addr=$TG1; else pid=$tg_pg_pid key=$tg_pg_key addr=$TG2; fi
    out=$("$BENCH" load --url "http://$addr/v1/chat/completions" --mode max --secs "$ADMITTED_SECS" --conns 64 --model bench --header "Authorization: Bearer $key")
    ok=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"])')
    # A second for the lease rounds and the background sweeps to settle.
    sleep 1
    rss=$(rss_kb "$pid")
    echo "== round $round $b: +$ok admitted, RSS $rss KB" >&2
    total[$b]=$(( ${total[$b]:-0} + ok ))
    if [ "$round" = 1 ]; then first_rss[$b]=$rss first_n[$b]=${total[$b]}; fi
    last_rss[$b]=$rss
  done
done
echo "| Tollgate on | admitted after round 1 | RSS after round 1 → after round $ADMITTED_ROUNDS (MB) | bytes of RSS per admitted request |"
echo "|---|---|---|---|"
for b in "${backends[@]}"; do
  n=$(( total[$b] - first_n[$b] ))
  name="SQLite + in-process counters"; [ "$b" = pg ] && name="Postgres + Redis"
  python3 -c "import sys; a,z,n=map(int,sys.argv[1:]); print(f'| $name | {n:,} | {a/1024:.1f} → {z/1024:.1f} | {(z-a)*1024/max(n,1):.1f} |')" "${first_rss[$b]}" "${last_rss[$b]}" "$n"
done
