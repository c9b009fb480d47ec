#!/usr/bin/env bash
# The proxy's overhead against its floor, in one run on this machine (issue 5):
#   direct to a fast fake provider | nginx as a plain reverse proxy (the floor for one hop) |
#   Pingora's own proxy with no logic (pingora-proxy's upstream path, which Tollgate does not use) |
#   the lean floor: Tollgate's own path with no logic (answered from request_filter after
#   Tollgate's one-write upstream exchange on its idle lists: the floor on the framework as
#   Tollgate uses it; examples/lean_floor.rs) |
#   Tollgate on SQLite + in-process counters | Tollgate on Postgres + Redis (when they answer)
# with auth, rate limiting and credit metering on for Tollgate. For each:
#   (a) p50/p99 latency at a fixed 1,000 requests/s for 15 s (open loop, 64 connections)
#   (b) maximum throughput on 64 connections for 10 s (closed loop)
#   (c) 500 concurrent streams of 50 chunks (10 ms apart): time to last byte p50/p99, errors
#   (d) resident memory of the proxy afterwards
#   (e) the proxy's CPU time per request in (b): utime + stime of its processes (nginx's
#       workers) from /proc over the requests that run completed
# and prints one table with the ratios to nginx and to direct; then MCP tools/call, direct to a
# fast fake tool server vs nginx and bare Pingora in front of it (the floors) vs through Tollgate on
# SQLite (billed: hold, charge, developer share),
# (a) and (b) again, in a second table; then the same for a chat completion through an
# Anthropic-kind provider (translated both ways) vs a Messages call direct to the same fake, in a
# third; then /v1/embeddings (a batch of 8 inputs) direct vs nginx and bare Pingora vs through
# Tollgate on SQLite (held, charged the provider's prompt_tokens), in a fourth; then
# every other front door (Responses, stored and with store: false; Messages; Gemini) and chat
# with a key that has every control set (budget, allowlist, RPM, TPM, in-flight) and with an
# organization's key (its wallet and plan), with sticky routing applied (an `x-session-id`
# conversation: its key hashed, its affinity read and written in-process), and chat answered
# from the response cache (every request a hit: no provider call, the hold and a usage row)
# through Tollgate on SQLite beside its chat completions (the same prompt and fake), JSON and
# 500 streams, in a fifth; then 500 streams cut once at half their length and resumed on another
# provider (X-Tollgate-Resume) vs the same streams uncut, time to last byte, in a sixth; and last
# the issue-31 table: each chat target's row in the units of issue 31's goals (CPU per request and
# max rps on 32 connections, added p50 at 20 and 200 requests/s, 20-chunk streams, 2,000 idle
# client connections, RSS after the 500 streams), measured right after its rows in the first
# table, against nginx and the lean floor (benches/targets.sh; about 2.5 minutes more); then what
# tracing costs: chat through Tollgate on SQLite with traces off, on at the default sample_ratio
# and on at 1.0, exporting to a sink, interleaved (benches/tracing.sh; about 4 minutes more);
# then the caching levers: plain, sticky and response-cache-hit chat, in-process and with Redis
# counters, interleaved (benches/caching.sh; about 5 minutes more).
# Loopback only; bounded.
# LOADGEN=oha runs (a) and (b) with oha instead of our tollgate-bench (built once into the target
# dir when missing), for the figures a benchmarker would get; the 500 streams stay on ours (the
# issue-31 table's streams are oha's too).
# The setup is shared with benches/growth.sh through benches/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
RPS=${RPS:-1000} RATE_SECS=${RATE_SECS:-15} MAX_SECS=${MAX_SECS:-10} STREAMS=${STREAMS:-500}

# shellcheck source=benches/lib.sh
. benches/lib.sh
# shellcheck source=benches/targets.sh
. benches/targets.sh
# shellcheck source=benches/tracing.sh
. benches/tracing.sh
# shellcheck source=benches/caching.sh
. benches/caching.sh
bench_setup
start_fakes 50 10
start_nginx
start_floor

start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
targets=("direct|$FAKE|" "nginx|$NGX|" "pingora|$PGR|" "lean|$LEAN|" "tollgate-sqlite|$TG1|$tg_sqlite_key")
if pg_isready -h 127.0.0.1 -q 2>/dev/null && redis-cli -h 127.0.0.1 ping 2>/dev/null | grep -q PONG; then
  PGDB="tollgate_bench_$$"
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $PGDB"
  start_tollgate tg_pg "$TG2" "postgres://postgres@127.0.0.1:5432/$PGDB" "redis://127.0.0.1:6379/"
  targets+=("tollgate-postgres-redis|$TG2|$tg_pg_key")
fi
[ "$LOADGEN" = oha ] && echo "load generator for (a), (b) and the issue-31 table: oha ($("$OHA" --version)); the 500 streams: tollgate-bench" >&2

results="$work/results.jsonl"
for t in "${targets[@]}"; do
  IFS='|' read -r name addr key <<<"$t"
  auth=()
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  url="http://$addr/v1/chat/completions"
  echo "== $name" >&2
  rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" --model bench "${auth[@]}")
  max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" --model bench "${auth[@]}")
  streams=$("$BENCH" load --url "$url" --mode streams --conns "$STREAMS" --stream --model bench "${auth[@]}")
  rss=$(rss_of "$name")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max,\"streams\":$streams,\"rss_kb\":${rss:-0}}" >> "$results"
  # Bare Pingora is not one of issue 31's floors.
  if [ "$name" != pingora ]; then t31_row "$name" "$addr" "$key"; fi
done

# MCP tools/call: the bench account registers the fake tool server at 1 credit a call.
register_bench_tools "$TG1" "$tg_sqlite_key"
tools="$work/tools.jsonl"
for t in "direct|http://$TOOLS/mcp|echo|" "nginx|http://$NGX_TOOLS/mcp|echo|" "pingora-tools|http://$PGR_TOOLS/mcp|echo|" "lean-tools|http://$LEAN_TOOLS/mcp|echo|" "tollgate-sqlite|http://$TG1/mcp|bench-tools__echo|$tg_sqlite_key"; do
  IFS='|' read -r name url tool key <<<"$t"
  auth=()
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":{\"text\":\"hi\"}}}"
  echo "== tools/call $name" >&2
  rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" --body "$body" "${auth[@]}")
  max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" --body "$body" "${auth[@]}")
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
  rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" --model bench-claude "${extra[@]}")
  max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" --model bench-claude "${extra[@]}")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max}" >> "$anth"
done

# Embeddings: a batch of 8 short inputs, the same body everywhere (the fake ignores the model).
emb="$work/embeddings.jsonl"
ebody='{"model":"bench-emb","input":["one","two","three","four","five","six","seven","eight"]}'
for t in "direct|$FAKE|" "nginx|$NGX|" "pingora|$PGR|" "lean|$LEAN|" "tollgate-sqlite|$TG1|$tg_sqlite_key"; do
  IFS='|' read -r name addr key <<<"$t"
  auth=()
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  url="http://$addr/v1/embeddings"
  echo "== embeddings $name" >&2
  rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" --body "$ebody" "${auth[@]}")
  max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" --body "$ebody" "${auth[@]}")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max}" >> "$emb"
done

# Every front door beside chat completions, through the same Tollgate and fake: the Responses
# API (a stored response is also a row in the ledger), the Messages API and the Gemini API, each
# the chat request written in another shape; JSON and 500 streams.
resp="$work/responses.jsonl"
say='Say something short.'
rbody="{\"model\":\"bench\",\"input\":\"$say\"}"
rbody_nostore="{\"model\":\"bench\",\"input\":\"$say\",\"store\":false}"
mbody="{\"model\":\"bench\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"$say\"}]}"
gbody="{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"$say\"}]}]}"
stream_of() { echo "${1%\}},\"stream\":true}"; }
# A key with every control set (a budget, an allowlist and all three limits), far from each so
# that none refuses: what checking them costs beside the plain key's chat row.
ctl_key=$(curl -sf "http://$TG1/api/v1/keys" -H "Authorization: Bearer $tg_sqlite_key" -H 'Content-Type: application/json' \
  -d '{"name":"controls","budget_credits":100000000,"budget_period":"month","allowed_models":["bench"],"requests_per_minute":1000000000,"tokens_per_minute":1000000000,"concurrent_requests":100000}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
# An organization key (issue 51): the organization's wallet and business plan, the bench
# account its owner; what spending from an organization costs beside a personal key.
org=$(curl -sf "http://$TG1/api/v1/orgs" -H "Authorization: Bearer $tg_sqlite_key" -H 'Content-Type: application/json' \
  -d '{"name":"bench"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -sf -X PUT "http://$TG1/api/v1/admin/accounts/$org/plan" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"plan":"business","requests_per_hour":1000000000}' >/dev/null
curl -sf "http://$TG1/api/v1/admin/accounts/$org/credits" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"delta":100000000,"reason":"bench"}' >/dev/null
org_key=$(curl -sf "http://$TG1/api/v1/keys" -H "Authorization: Bearer $tg_sqlite_key" -H 'Content-Type: application/json' \
  -d "{\"name\":\"org\",\"organization_id\":\"$org\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
for t in "chat|/v1/chat/completions||/v1/chat/completions|" \
         "chat-sticky|/v1/chat/completions||/v1/chat/completions|" \
         "chat-cache-hit|/v1/chat/completions||/v1/chat/completions|" \
         "chat-key-controls|/v1/chat/completions||/v1/chat/completions|" \
         "chat-org-key|/v1/chat/completions||/v1/chat/completions|" \
         "responses|/v1/responses|$rbody|/v1/responses|$(stream_of "$rbody")" \
         "responses-store-false|/v1/responses|$rbody_nostore|/v1/responses|$(stream_of "$rbody_nostore")" \
         "messages|/v1/messages|$mbody|/v1/messages|$(stream_of "$mbody")" \
         "gemini|/v1beta/models/bench:generateContent|$gbody|/v1beta/models/bench:streamGenerateContent?alt=sse|$gbody"; do
  IFS='|' read -r name path body spath sbody <<<"$t"
  key=$tg_sqlite_key
  [ "$name" = chat-key-controls ] && key=$ctl_key
  [ "$name" = chat-org-key ] && key=$org_key
  auth=(--header "Authorization: Bearer $key")
  # Sticky routing applies to a request that names its conversation (or has a prompt large
  # enough to cache, which this bench's is not): the chat row's cost plus sticky routing's.
  [ "$name" = chat-sticky ] && auth+=(--header "x-session-id: bench-conversation")
  if [ "$name" = chat-cache-hit ]; then
    # Filled once, JSON and stream, so that every request of the row is a hit.
    for s in "" --stream; do
      # shellcheck disable=SC2086
      "$BENCH" body --model bench $s | curl -sf "http://$TG1/v1/chat/completions" -H "Authorization: Bearer $key" \
        -H 'X-Tollgate-Cache: on' -H 'Content-Type: application/json' --data-binary @- >/dev/null
    done
    auth+=(--header "X-Tollgate-Cache: on")
  fi
  if [ -n "$body" ]; then
    extra=("${auth[@]}" --body "$body")
    streams=$("$BENCH" load --url "http://$TG1$spath" --mode streams --conns "$STREAMS" --body "$sbody" "${auth[@]}")
  else
    extra=("${auth[@]}" --model bench)
    streams=$("$BENCH" load --url "http://$TG1$spath" --mode streams --conns "$STREAMS" --stream "${extra[@]}")
  fi
  echo "== front door $name" >&2
  rate=$(loadgen rate "http://$TG1$path" "$RATE_SECS" 64 "$RPS" "${extra[@]}")
  max=$(measure "tollgate-sqlite" loadgen max "http://$TG1$path" "$MAX_SECS" 64 "$RPS" "${extra[@]}")
  echo "{\"name\":\"$name\",\"rate\":$rate,\"max\":$max,\"streams\":$streams}" >> "$resp"
done

# Streams that survive a cut (issue 32): a second Tollgate on SQLite whose model `bench-cut` is
# served by a fake that drops every stream at half its length (25 of 50 chunks), resumed on
# `bench-whole` (the chat fake, the same tier); time to last byte of 500 such streams vs 500
# uncut streams of `bench-whole` through the same instance, in the same run.
CUT=127.0.0.1:19111 TG3=127.0.0.1:19112
"$BENCH" fake --listen "$CUT" --words 50 --delay-ms 10 --die-after 25 2>/dev/null & pids+=($!)
sed -e "s|^listen = .*|listen = \"$TG3\"|" -e "s|^database_url = .*|database_url = \"sqlite://$work/resume.db\"|" \
  "$work/tg_sqlite.toml" > "$work/tg_resume.toml"
cat >> "$work/tg_resume.toml" <<TOML
[[providers]]
name = "cut"
endpoints = ["http://$CUT"]
[[models]]
id = "bench-cut"
provider = "cut"
tier = "powerful"
input_credits_per_1k = 0.15
output_credits_per_1k = 0.6
[[models]]
id = "bench-whole"
provider = "fake"
tier = "powerful"
input_credits_per_1k = 0.15
output_credits_per_1k = 0.6
TOML
TOLLGATE_BENCH_ANTHROPIC_KEY=sk-ant-bench TOLLGATE_ADMIN_TOKEN=$ADMIN_TOKEN TOLLGATE_LOG=warn "$TOLLGATE" serve --config "$work/tg_resume.toml" 2>"$work/tg_resume.log" &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://$TG3/readyz" 2>/dev/null | grep -q '"ledger":true' && break
  sleep 0.1
done
signup=$(curl -sf "http://$TG3/api/v1/auth/signup" -d "{\"email\":\"resume-$$@example.com\",\"password\":\"benchmark1\"}")
uid=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["user_id"])')
rkey=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
curl -sf -X PUT "http://$TG3/api/v1/admin/accounts/$uid/plan" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"plan":"business","requests_per_hour":1000000000}' >/dev/null
curl -sf "http://$TG3/api/v1/admin/accounts/$uid/credits" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"delta":100000000,"reason":"bench"}' >/dev/null
cut="$work/resume.jsonl"
for t in "uncut|bench-whole" "cut-once-resumed|bench-cut"; do
  IFS='|' read -r name m <<<"$t"
  echo "== resumed streams $name" >&2
  streams=$("$BENCH" load --url "http://$TG3/v1/chat/completions" --mode streams --conns "$STREAMS" --stream --model "$m" \
    --header "Authorization: Bearer $rkey" --header "X-Tollgate-Resume: on")
  echo "{\"name\":\"$name\",\"streams\":$streams}" >> "$cut"
done

python3 - "$results" "$tools" "$anth" "$emb" "$resp" "$cut" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r["name"]: r for r in rows}
d, n = by["direct"], by["nginx"]
lean = by.get("lean", n)
def added(r, k): return r["rate"][k] - d["rate"][k]
print()
def cpu_of(r):
    return r["max"]["cpu_us"] / max(r["max"].get("requests", 0), 1)
def cpu(r, base=None, floor=None):
    # CPU µs of the proxy per request of the closed-loop run; none for direct. Ratios to
    # nginx's and to the lean floor's when given.
    if r["name"] == "direct" or not r["max"].get("requests"):
        return "–"
    c = cpu_of(r)
    if base and floor:
        return f"{c:.1f} ({c / base:.2f}×, {c / floor:.2f}×)"
    return f"{c:.1f} ({c / base:.2f}×)" if base else f"{c:.1f}"
ncpu, lcpu = cpu_of(n), cpu_of(lean)
print("| target | p50 µs @1k rps | p99 µs | added p50 (× nginx's) | added p99 (× nginx's) | max rps @64 conns (× nginx, × lean) | CPU µs/req (× nginx's, × lean's) | 500 streams TTLB p50 / p99 ms (p99 × direct) | errors | RSS MB |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    name = r["name"]
    a50, a99 = added(r, "p50_us"), added(r, "p99_us")
    n50, n99 = added(n, "p50_us"), added(n, "p99_us")
    x50 = f"{a50} ({a50 / n50:.2f}×)" if name not in ("direct", "nginx") and n50 > 0 else str(a50)
    x99 = f"{a99} ({a99 / n99:.2f}×)" if name not in ("direct", "nginx") and n99 > 0 else str(a99)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / n["max"]["rps"]:.2f}×, {r["max"]["rps"] / lean["max"]["rps"]:.2f}×)'
    s = r["streams"]
    ttlb = f'{s["p50_us"]/1000:.1f} / {s["p99_us"]/1000:.1f} ({s["p99_us"] / max(d["streams"]["p99_us"], 1):.2f}×)'
    errors = r["rate"]["errors"] + r["max"]["errors"] + s["errors"]
    c = cpu(r, ncpu if name not in ("direct", "nginx") and ncpu > 0 else None, lcpu if name not in ("direct", "nginx", "lean") and lcpu > 0 else None)
    print(f'| {name} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x50} | {x99} | {rps} | {c} | {ttlb} | {errors} | {r["rss_kb"] / 1024:.1f} |')
print()
print("targets: added p50 ≤ 1.5× nginx's, added p99 ≤ 2× nginx's, max rps ≥ 0.7× nginx, CPU/req ≤ 2× nginx's, streams: no errors, TTLB p99 ≤ 1.1× direct, RSS ≤ 48 MB")
tools = [json.loads(l) for l in open(sys.argv[2])]
td = tools[0]
chat_added = by["tollgate-sqlite"]["rate"]["p50_us"] - d["rate"]["p50_us"]
print()
tn = next((r for r in tools if r["name"] == "nginx"), td)
tp = next((r for r in tools if r["name"] == "pingora-tools"), td)
tl = next((r for r in tools if r["name"] == "lean-tools"), td)
tncpu, tlcpu = cpu_of(tn), cpu_of(tl)
print("| tools/call | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× direct, × nginx, × pingora, × lean) | CPU µs/req (× nginx's, × lean's) | errors |")
print("|---|---|---|---|---|---|---|")
for r in tools:
    a50 = r["rate"]["p50_us"] - td["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if r["name"].startswith("tollgate") and chat_added > 0 else str(a50)
    m = r["max"]["rps"]
    rps = f'{m:.0f} ({m / td["max"]["rps"]:.2f}×, {m / tn["max"]["rps"]:.2f}×, {m / tp["max"]["rps"]:.2f}×, {m / tl["max"]["rps"]:.2f}×)'
    c = cpu(r, tncpu, tlcpu) if r["name"].startswith("tollgate") else cpu(r)
    print(f'| {r["name"].removesuffix("-tools")} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {c} | {r["rate"]["errors"] + r["max"]["errors"]} |')
print()
print("targets: tools/call max rps ≥ 0.7× nginx's, added p50 ≤ 2× the chat path's")
an = [json.loads(l) for l in open(sys.argv[3])]
ad = an[0]
print()
print("| Anthropic-kind provider | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× direct) | CPU µs/req | errors |")
print("|---|---|---|---|---|---|---|")
for r in an:
    a50 = r["rate"]["p50_us"] - ad["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if r is not ad and chat_added > 0 else str(a50)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / ad["max"]["rps"]:.2f}×)'
    print(f'| {r["name"]} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {cpu(r)} | {r["rate"]["errors"] + r["max"]["errors"]} |')
em = [json.loads(l) for l in open(sys.argv[4])]
ed = em[0]
en = next((r for r in em if r["name"] == "nginx"), ed)
print()
print("| /v1/embeddings (8 inputs) | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× direct, × nginx) | CPU µs/req | errors |")
print("|---|---|---|---|---|---|---|")
for r in em:
    a50 = r["rate"]["p50_us"] - ed["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if r["name"].startswith("tollgate") and chat_added > 0 else str(a50)
    m = r["max"]["rps"]
    rps = f'{m:.0f} ({m / ed["max"]["rps"]:.2f}×, {m / en["max"]["rps"]:.2f}×)'
    print(f'| {r["name"]} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {cpu(r)} | {r["rate"]["errors"] + r["max"]["errors"]} |')
rs = [json.loads(l) for l in open(sys.argv[5])]
rc = rs[0]
print()
print("| through tollgate-sqlite | p50 µs @1k rps | p99 µs | added p50 (× the chat path's added p50) | max rps @64 conns (× chat) | CPU µs/req | 500 streams TTLB p50 / p99 ms | errors |")
print("|---|---|---|---|---|---|---|---|")
for r in rs:
    a50 = r["rate"]["p50_us"] - d["rate"]["p50_us"]
    x = f"{a50} ({a50 / chat_added:.2f}×)" if chat_added > 0 else str(a50)
    rps = f'{r["max"]["rps"]:.0f} ({r["max"]["rps"] / rc["max"]["rps"]:.2f}×)'
    s = r["streams"]
    errors = r["rate"]["errors"] + r["max"]["errors"] + s["errors"]
    print(f'| {r["name"]} | {r["rate"]["p50_us"]} | {r["rate"]["p99_us"]} | {x} | {rps} | {cpu(r)} | {s["p50_us"]/1000:.1f} / {s["p99_us"]/1000:.1f} | {errors} |')
st = next((r for r in rs if r["name"] == "chat-sticky"), None)
if st and rc["max"].get("requests") and st["max"].get("requests"):
    print()
    print(f'sticky routing: CPU/req {cpu_of(st) / cpu_of(rc):.3f}× chat\'s, max rps {st["max"]["rps"] / rc["max"]["rps"]:.3f}× chat\'s (target: CPU/req ≤ 1.05× chat\'s)')
cs = [json.loads(l) for l in open(sys.argv[6])]
cu = cs[0]["streams"]
print()
print("| 500 streams of 50 chunks, tollgate-sqlite | TTLB p50 / p99 ms | × uncut (p50, p99) | errors |")
print("|---|---|---|---|")
for r in cs:
    s = r["streams"]
    print(f'| {r["name"]} | {s["p50_us"]/1000:.1f} / {s["p99_us"]/1000:.1f} | {s["p50_us"] / max(cu["p50_us"], 1):.2f}×, {s["p99_us"] / max(cu["p99_us"], 1):.2f}× | {s["errors"]} |')
PY
t31_table "$results"
tracing_rows
caching_rows
