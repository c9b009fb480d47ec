#!/usr/bin/env bash
# The proxy's overhead against its floor, in one run on this machine (issue 5):
#   direct to a fast fake provider | nginx as a plain reverse proxy (the floor for one hop) |
#   Tollgate on SQLite + in-process counters | Tollgate on Postgres + Redis (when they answer)
# with auth, rate limiting and credit metering on for Tollgate. For each:
#   (a) p50/p99 latency at a fixed 1,000 requests/s for 15 s (open loop, 64 connections)
#   (b) maximum throughput on 64 connections for 10 s (closed loop)
#   (c) 500 concurrent streams of 50 chunks (10 ms apart): time to last byte p50/p99, errors
#   (d) resident memory of the proxy afterwards
# and prints one table with the ratios to nginx and to direct; then MCP tools/call, direct to a
# fast fake tool server vs through Tollgate on SQLite (billed: hold, charge, developer share),
# (a) and (b) again, in a second table; then the same for a chat completion through an
# Anthropic-kind provider (translated both ways) vs a Messages call direct to the same fake, in a
# third. Loopback only; bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
RPS=${RPS:-1000} RATE_SECS=${RATE_SECS:-15} MAX_SECS=${MAX_SECS:-10} STREAMS=${STREAMS:-500}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need nginx || ! need cmake; then
  apt-get update -qq && apt-get install -y -qq nginx-light cmake >/dev/null 2>&1 || apt-get install -y -qq nginx cmake >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
cargo build --release -p tollgate --bin tollgate -p tollgate-testkit --bin tollgate-bench 2>&1 | tail -1

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -n "${PGDB:-}" ] && psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $PGDB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
BENCH=target/release/tollgate-bench
FAKE=127.0.0.1:19100 NGX=127.0.0.1:19101 TG1=127.0.0.1:19102 TG2=127.0.0.1:19103 TOOLS=127.0.0.1:19104 ANTH=127.0.0.1:19105

"$BENCH" fake --listen "$FAKE" --words 50 --delay-ms 10 2>/dev/null & pids+=($!)
"$BENCH" tools --listen "$TOOLS" 2>/dev/null & pids+=($!)
"$BENCH" anthropic --listen "$ANTH" 2>/dev/null & pids+=($!)

cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream fake { server $FAKE; keepalive 128; }
  server {
    listen $NGX;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGINX
"$NGINX" -c "$work/nginx.conf" -p "$work" 2>/dev/null

start_tollgate() { # name listen database_url redis_url
  local name=$1 listen=$2 db=$3 redis=$4
  cat > "$work/$name.toml" <<TOML
[server]
listen = "$listen"
metrics_listen = ""
threads = 2
[storage]
database_url = "$db"
redis_url = "$redis"
redis_prefix = "bench$$"
[[providers]]
name = "fake"
endpoints = ["http://$FAKE"]
[[models]]
id = "bench"
provider = "fake"
tier = "economy"
input_credits_per_1k = 0.15
output_credits_per_1k = 0.6
[[providers]]
name = "claude"
kind = "anthropic"
endpoints = ["http://$ANTH"]
api_key_env = "TOLLGATE_BENCH_ANTHROPIC_KEY"
[[models]]
id = "bench-claude"
provider = "claude"
tier = "normal"
input_credits_per_1k = 0.8
output_credits_per_1k = 4
[mcp]
allow_private_upstreams = true
TOML
  TOLLGATE_BENCH_ANTHROPIC_KEY=sk-ant-bench TOLLGATE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef TOLLGATE_LOG=warn target/release/tollgate serve --config "$work/$name.toml" 2>"$work/$name.log" &
  pids+=($!)
  eval "${name}_pid=$!"
  for _ in $(seq 1 100); do
    curl -sf "http://$listen/readyz" 2>/dev/null | grep -q '"ledger":true' && break
    sleep 0.1
  done
  local signup uid key
  signup=$(curl -sf "http://$listen/api/v1/auth/signup" -d "{\"email\":\"$name-$$@example.com\",\"password\":\"benchmark1\"}")
  uid=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["user_id"])')
  key=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
  # Limited (a business limit too high to reach, still checked and counted on every request) and funded.
  curl -sf -X PUT "http://$listen/api/v1/admin/accounts/$uid/plan" -H 'Authorization: Bearer bench-admin-token-0123456789abcdef' -d '{"plan":"business","requests_per_hour":1000000000}' >/dev/null
  curl -sf "http://$listen/api/v1/admin/accounts/$uid/credits" -H 'Authorization: Bearer bench-admin-token-0123456789abcdef' -d '{"delta":100000000,"reason":"bench"}' >/dev/null
  eval "${name}_key=$key"
}

start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
targets=("direct|$FAKE|" "nginx|$NGX|" "tollgate-sqlite|$TG1|$tg_sqlite_key")
if pg_isready -h 127.0.0.1 -q 2>/dev/null && redis-cli -h 127.0.0.1 ping 2>/dev/null | grep -q PONG; then
  PGDB="tollgate_bench_$$"
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $PGDB"
  start_tollgate tg_pg "$TG2" "postgres://postgres@127.0.0.1:5432/$PGDB" "redis://127.0.0.1:6379/"
  targets+=("tollgate-postgres-redis|$TG2|$tg_pg_key")
fi

rss_of() { # name
  case $1 in
    direct) echo 0 ;;
    nginx) ps -o rss= --ppid "$(cat "$work/nginx.pid")" | awk '{s+=$1} END {print s}' ;;
    tollgate-sqlite) ps -o rss= -p "$tg_sqlite_pid" ;;
    tollgate-postgres-redis) ps -o rss= -p "$tg_pg_pid" ;;
  esac
}

results="$work/results.jsonl"
for t in "${targets[@]}"; do
  IFS='|' read -r name addr key <<<"$t"
  auth=()
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  url="http://$addr/v1/chat/completions"
  echo "== $name" >&2
  rate=$("$BENCH" load --url "$url" --mode rate --rps "$RPS" --secs "$RATE_SECS" --conns 64 --model bench "${auth[@]}")
  max=$("$BENCH" load --url "$url" --mode max --secs "$MAX_SECS" --conns 64 --model bench "${auth[@]}")
  streams=$("$BENCH" load --url "$url" --mode streams --conns "$STREAMS" --stream --model bench "${auth[@]}")
  rss=$(rss_of "$name")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max,\"streams\":$streams,\"rss_kb\":${rss:-0}}" >> "$results"
done

# MCP tools/call: the bench account registers the fake tool server at 1 credit a call.
ADMIN='Authorization: Bearer bench-admin-token-0123456789abcdef'
curl -sf "http://$TG1/api/v1/mcp/services" -H "Authorization: Bearer $tg_sqlite_key" \
  -d "{\"slug\":\"bench-tools\",\"upstream_url\":\"http://$TOOLS/mcp\",\"default_credits\":1}" >/dev/null
curl -sf -X POST "http://$TG1/api/v1/admin/mcp/services/bench-tools/approve" -H "$ADMIN" >/dev/null
tools="$work/tools.jsonl"
for t in "direct|http://$TOOLS/mcp|echo|" "tollgate-sqlite|http://$TG1/mcp|bench-tools__echo|$tg_sqlite_key"; do
  IFS='|' read -r name url tool key <<<"$t"
  auth=()
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":{\"text\":\"hi\"}}}"
  echo "== tools/call $name" >&2
  rate=$("$BENCH" load --url "$url" --mode rate --rps "$RPS" --secs "$RATE_SECS" --conns 64 --body "$body" "${auth[@]}")
  max=$("$BENCH" load --url "$url" --mode max --secs "$MAX_SECS" --conns 64 --body "$body" "${auth[@]}")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max}" >> "$tools"
done

# A chat completion through an Anthropic-kind provider (OpenAI in, Messages out and back) vs the
# Messages call direct to the same fake.
anth="$work/anthropic.jsonl"
msg='{"model":"bench-claude","max_tokens":64,"messages":[{"role":"user","content":"Say something short."}]}'
for t in "direct|http://$ANTH/v1/messages|$msg|x-api-key: sk-ant-bench" "tollgate-sqlite|http://$TG1/v1/chat/completions||Authorization: Bearer $tg_sqlite_key"; do
  IFS='|' read -r name url body header <<<"$t"
  extra=(--header "$header")
  [ "$name" = direct ] && extra+=(--header "anthropic-version: 2023-06-01" --body "$body")
  echo "== anthropic $name" >&2
  rate=$("$BENCH" load --url "$url" --mode rate --rps "$RPS" --secs "$RATE_SECS" --conns 64 --model bench-claude "${extra[@]}")
  max=$("$BENCH" load --url "$url" --mode max --secs "$MAX_SECS" --conns 64 --model bench-claude "${extra[@]}")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max}" >> "$anth"
done

python3 - "$results" "$tools" "$anth" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r["name"]: r for r in rows}
d, n = by["direct"], by["nginx"]
def added(r, k): return r["rate"][k] - d["rate"][k]
print()
print("| target | p50 µs @1k rps | p99 µs | added p50 (× nginx's) | added p99 (× nginx's) | max rps @64 conns (× nginx) | 500 streams TTLB p50 / p99 ms (p99 × direct) | errors | RSS MB |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    name = r["name"]
    a50, a99 = added(r, "p50_us"), added(r, "p99_us")
    n50, n99 = added(n, "p50_us"), added(n, "p99_us")
    x50 = f"{a50} ({a50 / n50:.2f}×)" if name not in ("direct", "nginx") and n50 > 0 else str(a50)
    x99 = f"{a99} ({a99 / n99:.2f}×)" if name not in ("direct", "nginx") and n99 > 0 else str(a99)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / n["max"]["rps"]:.2f}×)'
    s = r["streams"]
    ttlb = f'{s["p50_us"]/1000:.1f} / {s["p99_us"]/1000:.1f} ({s["p99_us"] / max(d["streams"]["p99_us"], 1):.2f}×)'
    errors = r["rate"]["errors"] + r["max"]["errors"] + s["errors"]
    print(f'| {name} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x50} | {x99} | {rps} | {ttlb} | {errors} | {r["rss_kb"] / 1024:.1f} |')
print()
print("targets: added p50 ≤ 1.5× nginx's, added p99 ≤ 2× nginx's, max rps ≥ 0.7× nginx, streams: no errors, TTLB p99 ≤ 1.1× direct, RSS ≤ 64 MB")
tools = [json.loads(l) for l in open(sys.argv[2])]
td = tools[0]
chat_added = by["tollgate-sqlite"]["rate"]["p50_us"] - d["rate"]["p50_us"]
print()
print("| tools/call | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× direct) | errors |")
print("|---|---|---|---|---|---|")
for r in tools:
    a50 = r["rate"]["p50_us"] - td["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if r is not td and chat_added > 0 else str(a50)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / td["max"]["rps"]:.2f}×)'
    print(f'| {r["name"]} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {r["rate"]["errors"] + r["max"]["errors"]} |')
print()
print("targets: tools/call max rps ≥ 0.5× direct, added p50 ≤ 2× the chat path's")
an = [json.loads(l) for l in open(sys.argv[3])]
ad = an[0]
print()
print("| Anthropic-kind provider | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× direct) | errors |")
print("|---|---|---|---|---|---|")
for r in an:
    a50 = r["rate"]["p50_us"] - ad["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if r is not ad and chat_added > 0 else str(a50)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / ad["max"]["rps"]:.2f}×)'
    print(f'| {r["name"]} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {r["rate"]["errors"] + r["max"]["errors"]} |')
PY
