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
    redis_rows=(on)
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
  local a1="Authorization: Bearer $tg_sqlite_key" a7="Authorization: Bearer ${tg_cache_redis_key:-}"
  local sticky="x-session-id: bench-conversation" hit="X-Tollgate-Cache: on" targets
  targets=("sqlite-plain|$TG1|$a1" "sqlite-sticky|$TG1|$a1;$sticky" "sqlite-cache-hit|$TG1|$a1;$hit")
  if [ ${#redis_rows[@]} -gt 0 ]; then
    targets+=("redis-plain|$TG7|$a7" "redis-sticky|$TG7|$a7;$sticky" "redis-cache-hit|$TG7|$a7;$hit")
  fi
  interleaved_rows caching "$work/caching.jsonl" "${targets[@]}"
  interleaved_table "$work/caching.jsonl" '[
    ["sqlite-plain", "SQLite, in-process: plain (a provider call)", "sqlite-plain"],
    ["sqlite-sticky", "SQLite, in-process: sticky (x-session-id)", "sqlite-plain"],
    ["sqlite-cache-hit", "SQLite, in-process: response cache hit", "sqlite-plain"],
    ["redis-plain", "SQLite, Redis counters: plain", "redis-plain"],
    ["redis-sticky", "SQLite, Redis counters: sticky (affinity in Redis)", "redis-plain"],
    ["redis-cache-hit", "SQLite, Redis counters: response cache hit (entry in Redis)", "redis-plain"]]' \
    "chat JSON" "goals: sticky's CPU per request ≤ 1.05× its plain row's; a cache hit's below a provider call's"
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
