#!/usr/bin/env bash
# What the caching levers cost and save per request (issue 53): chat completions (JSON) through
# Tollgate on SQLite with in-process counters, plain; with sticky routing applied (the
# conversation named by `x-session-id`: its key hashed, its affinity read and written
# in-process); answered from the response cache (every request a hit: no provider call, the hold
# and a usage row); and on a second instance with Redis counters, plain and sticky (the affinity
# read from Redis on the request path, written off it) and a hit (the entry in Redis). p50/p99 at a fixed rate, then max rps and
# the proxy's CPU per request on 64 connections; interleaved for ROUNDS rounds (default 3) so
# that the machine's drift falls on all alike. Goals: sticky's CPU per request within 5 % of
# plain on the same instance; a hit's CPU and latency below a provider call's.
#
# Sourced by benches/load.sh (its setup, fakes and tg_sqlite: `caching_rows`), or run alone:
# `bash benches/caching.sh` (release builds); `BIN_DIR=target/release` skips the build.

caching_rows() {
  local TG7=127.0.0.1:19117 redis_rows=()
  if redis-cli -h 127.0.0.1 ping 2>/dev/null | grep -q PONG; then
    start_tollgate tg_cache_redis "$TG7" "sqlite://$work/cache-redis.db" "redis://127.0.0.1:6379"
    redis_rows=("redis-plain|$TG7|$tg_cache_redis_key|" "redis-sticky|$TG7|$tg_cache_redis_key|sticky"
                "redis-cache-hit|$TG7|$tg_cache_redis_key|hit")
  else
    echo "caching: Redis does not answer on 127.0.0.1:6379; the Redis rows are left out" >&2
  fi
  # Fill each response cache once (the ledger's; Redis's), so that every request of a hit row
  # is a hit.
  local fill
  for fill in "$TG1|$tg_sqlite_key" ${redis_rows:+"$TG7|$tg_cache_redis_key"}; do
    "$BENCH" body --model bench | curl -sf "http://${fill%%|*}/v1/chat/completions" \
      -H "Authorization: Bearer ${fill#*|}" -H 'X-Tollgate-Cache: on' \
      -H 'Content-Type: application/json' --data-binary @- >/dev/null
  done
  local out="$work/caching.jsonl" round name addr key what url hdr
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for t in "sqlite-plain|$TG1|$tg_sqlite_key|" "sqlite-sticky|$TG1|$tg_sqlite_key|sticky" \
             "sqlite-cache-hit|$TG1|$tg_sqlite_key|hit" "${redis_rows[@]}"; do
      IFS='|' read -r name addr key what <<<"$t"
      url="http://$addr/v1/chat/completions"
      hdr=(--header "Authorization: Bearer $key")
      [ "$what" = sticky ] && hdr+=(--header "x-session-id: bench-conversation")
      [ "$what" = hit ] && hdr+=(--header "X-Tollgate-Cache: on")
      echo "== caching round $round: $name" >&2
      rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" --model bench "${hdr[@]}")
      max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" --model bench "${hdr[@]}")
      echo "{\"name\":\"$name\",\"round\":$round,\"rate\":$rate,\"max\":$max}" >> "$out"
    done
  done
  python3 - "$out" <<'PY'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {"sqlite-plain": "sqlite-plain", "sqlite-sticky": "sqlite-plain", "sqlite-cache-hit": "sqlite-plain",
        "redis-plain": "redis-plain", "redis-sticky": "redis-plain", "redis-cache-hit": "redis-plain"}
label = {"sqlite-plain": "SQLite, in-process: plain (a provider call)",
         "sqlite-sticky": "SQLite, in-process: sticky (x-session-id)",
         "sqlite-cache-hit": "SQLite, in-process: response cache hit",
         "redis-plain": "SQLite, Redis counters: plain",
         "redis-sticky": "SQLite, Redis counters: sticky (affinity in Redis)",
         "redis-cache-hit": "SQLite, Redis counters: response cache hit (entry in Redis)"}
def cpu(r): return r["max"]["cpu_us"] / max(r["max"].get("requests", 0), 1)
by = {(r["name"], r["round"]): r for r in rows}
rounds = sorted({r["round"] for r in rows})
print()
print("| chat JSON | p50 / p99 µs @rate (median) | max rps @64 conns (median) | CPU µs/req (median) | × its plain row (median of rounds) | errors |")
print("|---|---|---|---|---|---|")
for n in label:
    rs = [by[(n, k)] for k in rounds if (n, k) in by]
    if not rs:
        continue
    ratio = median(cpu(by[(n, k)]) / cpu(by[(base[n], k)]) for k in rounds if (n, k) in by)
    p50 = median(r["rate"]["p50_us"] for r in rs)
    p99 = median(r["rate"]["p99_us"] for r in rs)
    rps = median(r["max"]["rps"] for r in rs)
    errors = sum(r["rate"]["errors"] + r["max"]["errors"] for r in rs)
    print(f'| {label[n]} | {p50:.0f} / {p99:.0f} | {rps:.0f} | {median(cpu(r) for r in rs):.1f} | {ratio:.3f}× | {errors} |')
print()
print("goals: sticky's CPU per request ≤ 1.05× its plain row's; a cache hit's below a provider call's")
PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  RPS=${RPS:-1000} RATE_SECS=${RATE_SECS:-15} MAX_SECS=${MAX_SECS:-10}
  # shellcheck source=benches/lib.sh
  . benches/lib.sh
  if [ -n "${BIN_DIR:-}" ]; then
    BENCH=$BIN_DIR/tollgate-bench TOLLGATE=$BIN_DIR/tollgate
    work=$(mktemp -d)
    pids=()
    trap bench_cleanup EXIT
  else
    bench_setup no-nginx
  fi
  start_fakes 50 10
  start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
  caching_rows
fi
