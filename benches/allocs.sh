#!/usr/bin/env bash
# Heap allocations per request through Tollgate, a count rather than a time (the same on a busy
# machine): `bash benches/allocs.sh [SECS]`. Tollgate (release build, SQLite + in-process
# counters, the bench account of benches/lib.sh: keyed, rate limited, metered) counts its own
# allocations: its allocator, jemalloc, prints its statistics at exit when asked
# (`_RJEM_MALLOC_CONF=stats_print:true`), and the requests it served are read from them (small
# and large allocation requests of all arenas). SQLite's own mallocs (the C library's) are not in
# them. For each path (chat JSON, chat stream of 50 chunks, MCP tools/call of the fake tool
# server's `echo`) two runs of the same length, one at RATE requests a second and one at twice
# that: the difference of their totals over the difference of their requests is what one
# request allocates (start-up, sign-up and the background services' work per second are the
# same in both and cancel out). The lean floor (examples/lean_floor.rs, the C library's malloc)
# is counted under valgrind's DHAT beside it, the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-8} RATE=${RATE:-40}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup no-nginx
start_fakes 50 1
REAL_LEAN=$(realpath "$LEAN_FLOOR")

# jemalloc's statistics (JSON, the last thing the process writes to stderr) → allocation requests
jemalloc_requests() { # log
  python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1], errors="replace").read()
start = text.rfind('{"jemalloc"')
merged = json.loads(text[start:])["jemalloc"]["stats.arenas"]["merged"]
print(merged["small"]["nrequests"] + merged["large"]["nrequests"])
PY
}

# One run: a fresh process, RATE requests/s of one path for SECS, then a graceful stop.
run_tollgate() { # path rate → total allocations, ok, errors
  local path=$1 rate=$2 n=$$-$1-$2
  _RJEM_MALLOC_CONF=stats_print:true,stats_print_opts:J start_tollgate "tg_$$" "$TG1" "sqlite://$work/allocs-$n.db" "" >/dev/null
  local key_var="tg_$$_key" pid_var="tg_$$_pid"
  local key=${!key_var} pid=${!pid_var}
  local url="http://$TG1/v1/chat/completions" extra=(--model bench)
  case $path in
    stream) extra+=(--stream) ;;
    tools)
      register_bench_tools "$TG1" "$key"
      url="http://$TG1/mcp"
      extra=(--body '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench-tools__echo","arguments":{"text":"hi"}}}') ;;
  esac
  local out; out=$("$BENCH" load --url "$url" --mode rate --secs "$SECS" --conns 4 --rps "$rate" "${extra[@]}" --header "Authorization: Bearer $key")
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  echo "$(jemalloc_requests "$work/tg_$$.log") $(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["ok"], j["errors"])')"
}

# The lean floor in front of the fake, under DHAT (no key, no account).
run_lean() { # path rate
  local path=$1 rate=$2 n=lean-$1-$2 extra=(--model bench)
  [ "$path" = stream ] && extra+=(--stream)
  valgrind --tool=dhat --dhat-out-file=/dev/null --log-file="$work/dhat-$n.log" "$REAL_LEAN" --listen "$LEAN" --upstream "$FAKE" 2>/dev/null &
  local pid=$!
  for _ in $(seq 1 600); do curl -s -o /dev/null "http://$LEAN/" && break; sleep 0.1; done
  local out; out=$("$BENCH" load --url "http://$LEAN/v1/chat/completions" --mode rate --secs "$SECS" --conns 4 --rps "$rate" "${extra[@]}")
  kill -INT "$pid"; sleep 1; kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  local blocks; blocks=$(sed -n 's/.*Total:.* in \([0-9,]*\) blocks.*/\1/p' "$work/dhat-$n.log" | tr -d , | tail -1)
  echo "$blocks $(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["ok"], j["errors"])')"
}

echo "| path | allocations per request | requests (runs at $RATE and $((RATE * 2))/s for ${SECS} s) | errors |"
echo "|---|---|---|---|"
for target in tollgate lean; do
  for path in json stream tools; do
    [ "$target" = lean ] && [ "$path" = tools ] && continue
    read -r b1 ok1 e1 <<<"$("run_$target" "$path" "$RATE")"
    read -r b2 ok2 e2 <<<"$("run_$target" "$path" $((RATE * 2)))"
    python3 -c "
b1, b2, ok1, ok2 = $b1, $b2, $ok1, $ok2
print(f'| $target $path | {(b2 - b1) / max(ok2 - ok1, 1):.1f} | {ok1} / {ok2} | {$e1 + $e2} |')"
  done
done
