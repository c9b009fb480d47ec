#!/usr/bin/env bash
# Two builds of the gateway side by side, interleaved, so that both see the same moment of a
# shared machine: `bash benches/ab.sh OLD_TOLLGATE_BIN NEW_TOLLGATE_BIN [ROUNDS]`.
# Both run on SQLite + in-process counters against one fake provider, each request keyed, rate
# limited and metered as in load.sh (the same setup: benches/lib.sh). Each round measures A then
# B: closed-loop max rps on 64 connections for 5 s with the proxy's CPU per request, then
# p50/p99 at 1,000 requests/s for 5 s. Prints the medians. AB_PATH=tools measures MCP tools/call
# instead (each build's bench account registers the fake tool server at 1 credit a call);
# AB_PATH=embeddings measures /v1/embeddings (load.sh's batch of 8 inputs); AB_PATH=responses a
# stored /v1/responses request (load.sh's).
# (Build the old one from a worktree: `git worktree add /tmp/old REV && (cd /tmp/old &&
# cargo build --release --bin tollgate)`.)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash benches/ab.sh OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") ROUNDS=${3:-6}
cd "$(dirname "$0")/.."

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup no-nginx
start_fakes 50 10
TOLLGATE=$A start_tollgate tg_a "$TG1" "sqlite://$work/a.db" ""
TOLLGATE=$B start_tollgate tg_b "$TG2" "sqlite://$work/b.db" ""
if [ "${AB_PATH:-chat}" = tools ]; then
  for t in "$TG1|$tg_a_key" "$TG2|$tg_b_key"; do
    IFS='|' read -r addr key <<<"$t"
    register_bench_tools "$addr" "$key"
  done
  call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench-tools__echo","arguments":{"text":"hi"}}}'
  shape=(--body "$call") route=/mcp
elif [ "${AB_PATH:-chat}" = responses ]; then
  shape=(--body '{"model":"bench","input":"Say something short."}') route=/v1/responses
elif [ "${AB_PATH:-chat}" = embeddings ]; then
  shape=(--body '{"model":"bench-emb","input":["one","two","three","four","five","six","seven","eight"]}') route=/v1/embeddings
else
  shape=(--model bench) route=/v1/chat/completions
fi
# measure's CPU column reads the pids of these two names.
proxy_pids() { case $1 in A) echo "$tg_a_pid" ;; B) echo "$tg_b_pid" ;; esac; }
for round in $(seq 1 "$ROUNDS"); do
  for t in "A|$TG1|$tg_a_key" "B|$TG2|$tg_b_key"; do
    IFS='|' read -r n addr key <<<"$t"
    u="http://$addr$route"
    m=$(measure "$n" "$BENCH" load --url "$u" --mode max --secs 5 --conns 64 "${shape[@]}" --header "Authorization: Bearer $key")
    r=$("$BENCH" load --url "$u" --mode rate --rps 1000 --secs 5 --conns 64 "${shape[@]}" --header "Authorization: Bearer $key")
    echo "{\"name\":\"$n\",\"round\":$round,\"max\":$m,\"rate\":$r}"
  done
done > "$work/ab.jsonl"
rss_a=$(ps -o rss= -p "$tg_a_pid") rss_b=$(ps -o rss= -p "$tg_b_pid")
python3 - "$work/ab.jsonl" "$A" "$B" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| build | max rps @64 conns: median (min–max) | CPU µs/req: median | p50 µs @1k rps: median | p99 µs: median |")
print("|---|---|---|---|---|")
for n, path in (("A", sys.argv[2]), ("B", sys.argv[3])):
    rs = [r for r in rows if r["name"] == n]
    rps = [r["max"]["rps"] for r in rs]
    cpu = [r["max"]["cpu_us"] / max(r["max"]["requests"], 1) for r in rs]
    p50 = [r["rate"]["p50_us"] for r in rs]
    p99 = [r["rate"]["p99_us"] for r in rs]
    print(f"| {n}: {path} | {statistics.median(rps):.0f} ({min(rps):.0f}–{max(rps):.0f}) | {statistics.median(cpu):.1f} | {statistics.median(p50):.0f} | {statistics.median(p99):.0f} |")
PY
echo "resident memory after the rounds: A $((rss_a / 1024)) MB, B $((rss_b / 1024)) MB"
