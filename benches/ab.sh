#!/usr/bin/env bash
# Two builds of the gateway side by side, interleaved, so that both see the same moment of a
# shared machine: `bash benches/ab.sh OLD_TOLLGATE_BIN NEW_TOLLGATE_BIN [ROUNDS]`.
# Both run on SQLite + in-process counters against one fake provider, each request keyed, rate
# limited and metered as in load.sh. Each round measures A then B: closed-loop max rps on 64
# connections for 5 s, then p50/p99 at 1,000 requests/s for 5 s. Prints the medians.
# (Build the old one from a worktree: `git worktree add /tmp/old REV && (cd /tmp/old &&
# cargo build --release --bin tollgate)`.)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bash benches/ab.sh OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
A=$1 B=$2 ROUNDS=${3:-6}
cargo build --release -p tollgate-testkit --bin tollgate-bench 2>&1 | tail -1
BENCH=target/release/tollgate-bench
work=$(mktemp -d)
trap 'for p in $(cat "$work/pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
FAKE=127.0.0.1:19200
"$BENCH" fake --listen "$FAKE" --words 50 --delay-ms 10 >/dev/null 2>&1 &
echo $! >> "$work/pids"

start() { # name binary listen → prints the key
  cat > "$work/$1.toml" <<TOML
[server]
listen = "$3"
metrics_listen = ""
threads = 2
[storage]
database_url = "sqlite://$work/$1.db"
[[providers]]
name = "fake"
endpoints = ["http://$FAKE"]
[[models]]
id = "bench"
provider = "fake"
tier = "economy"
input_credits_per_1k = 0.15
output_credits_per_1k = 0.6
TOML
  # stdout to /dev/null: this runs inside $(…), which would otherwise wait for the server.
  TOLLGATE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef TOLLGATE_LOG=warn "$2" serve --config "$work/$1.toml" >/dev/null 2>"$work/$1.log" &
  echo $! >> "$work/pids"
  for _ in $(seq 1 100); do
    curl -sf "http://$3/readyz" 2>/dev/null | grep -q '"ledger":true' && break
    sleep 0.1
  done
  local s uid key
  s=$(curl -sf "http://$3/api/v1/auth/signup" -d "{\"email\":\"$1-$$@example.com\",\"password\":\"benchmark1\"}")
  uid=$(echo "$s" | python3 -c 'import json,sys; print(json.load(sys.stdin)["user_id"])')
  key=$(echo "$s" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
  curl -sf -X PUT "http://$3/api/v1/admin/accounts/$uid/plan" -H 'Authorization: Bearer bench-admin-token-0123456789abcdef' -d '{"plan":"business","requests_per_hour":1000000000}' >/dev/null
  curl -sf "http://$3/api/v1/admin/accounts/$uid/credits" -H 'Authorization: Bearer bench-admin-token-0123456789abcdef' -d '{"delta":100000000,"reason":"bench"}' >/dev/null
  echo "$key"
}
KA=$(start a "$A" 127.0.0.1:19201)
KB=$(start b "$B" 127.0.0.1:19202)
for round in $(seq 1 "$ROUNDS"); do
  for t in "A|19201|$KA" "B|19202|$KB"; do
    IFS='|' read -r n port key <<<"$t"
    u="http://127.0.0.1:$port/v1/chat/completions"
    m=$("$BENCH" load --url "$u" --mode max --secs 5 --conns 64 --model bench --header "Authorization: Bearer $key")
    r=$("$BENCH" load --url "$u" --mode rate --rps 1000 --secs 5 --conns 64 --model bench --header "Authorization: Bearer $key")
    echo "{\"name\":\"$n\",\"round\":$round,\"max\":$m,\"rate\":$r}"
  done
done > "$work/ab.jsonl"
python3 - "$work/ab.jsonl" "$A" "$B" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| build | max rps @64 conns: median (min–max) | p50 µs @1k rps: median | p99 µs: median |")
print("|---|---|---|---|")
for n, path in (("A", sys.argv[2]), ("B", sys.argv[3])):
    rs = [r for r in rows if r["name"] == n]
    rps = [r["max"]["rps"] for r in rs]
    p50 = [r["rate"]["p50_us"] for r in rs]
    p99 = [r["rate"]["p99_us"] for r in rs]
    print(f"| {n}: {path} | {statistics.median(rps):.0f} ({min(rps):.0f}–{max(rps):.0f}) | {statistics.median(p50):.0f} | {statistics.median(p99):.0f} |")
PY
