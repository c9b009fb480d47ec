#!/usr/bin/env bash
# The field's scenarios (issue 31): what the public AI gateway benchmark harness measures, run
# here against our own targets, since that harness only drives hosted gateways from a Python
# script. In ONE run, each scenario against: direct to the fake provider (what the client would
# see with no proxy), nginx as a plain reverse proxy (the floor for one hop; every ratio is to
# it), the lean Pingora floor (examples/lean_floor.rs: Tollgate's own path with no logic, where
# a fixed upstream makes sense), Tollgate on SQLite with auth, limits and metering on, and
# LiteLLM's proxy with LITELLM=1. One markdown table per scenario:
#  1. overhead against concurrency: added p50/p99 over direct, closed loop on 1, 8, 32, 128
#     connections (a gateway that is cheap alone can queue under load; the four show where);
#  2. streaming: time to first byte and to the first content chunk, and the gaps between chunks
#     (the fake paces them CHUNK_MS apart: a proxy that buffers or batches shows as jitter
#     above direct's, which TTLB alone hides); STREAM_CONNS streams back to back, so they
#     start together, a burst of first tokens every half second;
#  3. tool-call deltas: an answer made of two parallel tool calls whose arguments come in ~64
#     pieces each (cut inside escapes and multi-byte characters); the client reassembles them
#     by index and checks them against what the fake sent (a proxy that parses and re-encodes
#     the stream must not change a byte), and time to last byte;
#  4. overhead against prompt size (1 KB, 32 KB, 256 KB bodies, open loop): what reading,
#     counting and forwarding a long prompt adds;
#  5. the failover and error path: a provider that answers 500, or closes without a word: time
#     to the second provider's answer (nginx's proxy_next_upstream is the floor), and to the
#     502 when there is no second; with Tollgate's default ejection too (3 failures, 30 s);
#  6. a flood of invalid keys (malformed, and well-formed but unknown: each a ledger lookup):
#     rejections per second and the proxy's CPU per request, and valid traffic's p50 meanwhile
#     (nginx's floor checks a static key in a map);
#  7. head-of-line blocking: small streams' TTFB/TTFC alone and while one 100k-token request
#     (a 400 KB prompt and a paced streamed reply, back to back, so one is always in flight) goes
#     through the same proxy: a proxy that tokenizes or buffers a big body on its event loop
#     stalls everyone else's first token;
#  8. the proxies' RSS at the start and after each scenario (growth that does not come back).
# CPU is the proxy's, from its threads' schedstat (ns). Loopback only, on ports of its own
# (SC_PORT_BASE, 19130..19149); bounded: about 3 minutes with the defaults (SECS=3 a run),
# LiteLLM adds about 1.5 (and 1.5 to install it into LITELLM_VENV once). Tunables: SECS, CONCS, STREAM_CONNS,
# CHUNK_MS, SIZES, SIZE_RPS, VALID_RPS, FLOOD_CONNS, BAD_KEYS, BIG_BYTES, BIG_TOKENS, LITELLM,
# LITELLM_WORKERS. Setup (nginx, the release build) is benches/lib.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-3} CONCS=${CONCS:-1 8 32 128} STREAM_CONNS=${STREAM_CONNS:-32} CHUNK_MS=${CHUNK_MS:-10}
SIZES=${SIZES:-1024 32768 262144} SIZE_RPS=${SIZE_RPS:-100} VALID_RPS=${VALID_RPS:-200}
FLOOD_CONNS=${FLOOD_CONNS:-32} BAD_KEYS=${BAD_KEYS:-50000} BIG_BYTES=${BIG_BYTES:-400000}
BIG_TOKENS=${BIG_TOKENS:-100} LITELLM=${LITELLM:-0} LITELLM_WORKERS=${LITELLM_WORKERS:-2}
VENV=${LITELLM_VENV:-.venv-bench}
export SECS STREAM_CONNS CHUNK_MS SIZE_RPS VALID_RPS FLOOD_CONNS BIG_BYTES BIG_TOKENS # the titles

# shellcheck source=benches/lib.sh
. benches/lib.sh
# Ports of our own (lib.sh's moved up), so a load.sh run at the same time does not collide.
B=${SC_PORT_BASE:-19130}
port() { echo "127.0.0.1:$((B + $1))"; }
FAKE=$(port 0) NGX=$(port 1) TG1=$(port 2) TOOLS=$(port 3) ANTH=$(port 4) LEAN=$(port 5)
DELTAS=$(port 6) BROKEN=$(port 7) CLOSER=$(port 8) LEAN_D=$(port 9) LLM=$(port 10)
bench_setup no-nginx
need nginx || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx) res=$work/scenarios.jsonl
NGX_KEY=ngx-bench-key LLM_KEY=sk-litellm-bench llm_pid= lean_d_pid=
trap 'stop_litellm; bench_cleanup' EXIT

# The processes of a target, its RSS (KB) and CPU time: lib.sh's, plus the two of ours.
descendants() { local c; for c in $(ps -o pid= --ppid "$1"); do echo "$c"; descendants "$c"; done; }
sc_pids() {
  case $1 in
    litellm) if [ -n "$llm_pid" ]; then echo "$llm_pid"; descendants "$llm_pid"; fi ;;
    lean-deltas) echo "$lean_d_pid" ;;
    *) proxy_pids "$1" ;;
  esac
}
sc_rss() { local p; p=$(sc_pids "$1" | tr -s ' \n' ','); p=${p#,}; p=${p%,}; [ -z "$p" ] && { echo 0; return; }; ps -o rss= -p "$p" | awk '{s+=$1} END {print s+0}'; }
# CPU in ns from each thread's schedstat: /proc/PID/stat's 10 ms ticks are too coarse for the
# few hundred requests of an open-loop run.
sc_cpu() { # shellcheck disable=SC2046 # one pid a word
  cat $(for p in $(sc_pids "$1"); do echo "/proc/$p/task/"*/schedstat; done) /dev/null 2>/dev/null | awk '{s+=$1} END {printf "%.0f", s}'
}
sc_measure() { # target command...: its JSON line with the proxy's cpu_us added
  local name=$1 before after out; shift; before=$(sc_cpu "$name"); out=$("$@"); after=$(sc_cpu "$name")
  echo "${out%\}},\"cpu_us\":$(((after - before) / 1000))}"
}
emit() { echo "$1" >> "$res"; }
stop_litellm() { [ -n "$llm_pid" ] && kill "$llm_pid" 2>/dev/null; return 0; }
auth_of() { auth=(); [ -n "$1" ] && auth=(--header "Authorization: Bearer $1"); return 0; }

# The fakes: the chat fake (replies as long as max_tokens asks, CHUNK_MS between chunks when
# streamed; every request here names max_tokens), the tool-call deltas fake, a provider that
# answers every request 500 and one that closes without answering.
start_fakes 100000 "$CHUNK_MS"
"$BENCH" deltas --listen "$DELTAS" --pieces 64 --delay-ms 2 2>/dev/null & pids+=($!)
"$BENCH" fake --listen "$BROKEN" --status 500 2>/dev/null & pids+=($!)
"$BENCH" closer --listen "$CLOSER" 2>/dev/null & pids+=($!)

# nginx: the plain proxy of lib.sh (same settings), with the routes the scenarios need beside
# it, in one instance (its pid file where lib.sh reads it, for RSS, CPU and the exit trap).
{ nginx_head; cat <<NGINX; } > "$work/nginx.conf"
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_buffering off;
  upstream fake { server $FAKE; keepalive 128; }
  upstream deltas { server $DELTAS; keepalive 32; }
  # The broken provider first, the fake only when it fails (max_fails=0: never marked down,
  # so every request tries the broken one, as Tollgate's rows with ejection off).
  upstream fo500 { server $BROKEN max_fails=0; server $FAKE backup; keepalive 32; }
  upstream foclose { server $CLOSER max_fails=0; server $FAKE backup; keepalive 32; }
  map \$http_authorization \$nokey { default 1; "Bearer $NGX_KEY" 0; }
  server {
    listen $NGX;
    location / { proxy_pass http://fake; }
    location /deltas/ { proxy_pass http://deltas/; }
    location /fo500/ { proxy_pass http://fo500/; proxy_next_upstream error timeout http_500 non_idempotent; }
    location /foclose/ { proxy_pass http://foclose/; proxy_next_upstream error timeout http_500 non_idempotent; }
    location /auth/ {
      if (\$nokey) { return 401 '{"error":{"message":"invalid API key","type":"invalid_request_error"}}'; }
      proxy_pass http://fake/;
    }
  }
}
NGINX
"$NGINX" -c "$work/nginx.conf" -p "$work" 2>/dev/null
# The lean floor in front of the chat fake, and another in front of the deltas fake.
"$LEAN_FLOOR" --listen "$LEAN" --upstream "$FAKE" 2>/dev/null & pids+=($!); lean_pid=$!
"$LEAN_FLOOR" --listen "$LEAN_D" --upstream "$DELTAS" 2>/dev/null & pids+=($!); lean_d_pid=$!

# Tollgate on SQLite (lib.sh's config and funded account), then the scenarios' providers and
# models added by a SIGHUP reload: one process serves every row. The failover models sit in
# the economy tier after `bench` (so `bench` is the next candidate); err-500 is alone in its
# tier (the 502 row). Ejection is off (a billion failures) except on `broken-ejecting`.
start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
TGK=$tg_sqlite_key
for p in "deltas|$DELTAS|" "broken|$BROKEN|1000000000" "closer|$CLOSER|1000000000" \
         "broken-alone|$BROKEN|1000000000" "broken-ejecting|$BROKEN|"; do
  IFS='|' read -r name addr eject <<<"$p"
  printf '[[providers]]\nname = "%s"\nendpoints = ["http://%s"]\n' "$name" "$addr" >> "$work/tg_sqlite.toml"
  if [ -n "$eject" ]; then
    echo "eject_after_failures = $eject" >> "$work/tg_sqlite.toml"
  fi
done
for m in "bench-deltas|deltas|normal" "fo-500|broken|economy" "fo-close|closer|economy" \
         "err-500|broken-alone|powerful" "fo-500-ejecting|broken-ejecting|economy"; do
  IFS='|' read -r id prov tier <<<"$m"
  printf '[[models]]\nid = "%s"\nprovider = "%s"\ntier = "%s"\ninput_credits_per_1k = 0.15\noutput_credits_per_1k = 0.6\n' \
    "$id" "$prov" "$tier" >> "$work/tg_sqlite.toml"
done
kill -HUP "$tg_sqlite_pid"
for _ in $(seq 1 100); do
  curl -sf "http://$TG1/v1/models" -H "Authorization: Bearer $TGK" | grep -q fo-500-ejecting && break
  sleep 0.1
done
curl -sf "http://$TG1/v1/models" -H "Authorization: Bearer $TGK" | grep -q fo-500-ejecting \
  || { echo "Tollgate did not take the scenarios' models (see $work/tg_sqlite.log)" >&2; exit 1; }

# LiteLLM's proxy (optional): the same fakes, a master key (its auth), fallbacks for the
# failover rows, cooldowns off (as Tollgate's ejection in those rows), no call home.
if [ "$LITELLM" = 1 ]; then
  if [ ! -x "$VENV/bin/litellm" ]; then
    echo "installing litellm[proxy] into $VENV (at most 5 minutes) ..." >&2
    { timeout 300 python3 -m venv "$VENV" && timeout 300 "$VENV/bin/pip" install -q 'litellm[proxy]'; } >&2 || true
  fi
  if [ -x "$VENV/bin/litellm" ]; then
    cat > "$work/litellm.yaml" <<YAML
model_list:
  - {model_name: bench, litellm_params: {model: openai/bench, api_base: "http://$FAKE/v1", api_key: sk-fake}}
  - {model_name: bench-deltas, litellm_params: {model: openai/bench-deltas, api_base: "http://$DELTAS/v1", api_key: sk-fake}}
  - {model_name: fo-500, litellm_params: {model: openai/fo-500, api_base: "http://$BROKEN/v1", api_key: sk-fake}}
  - {model_name: fo-close, litellm_params: {model: openai/fo-close, api_base: "http://$CLOSER/v1", api_key: sk-fake}}
  - {model_name: err-500, litellm_params: {model: openai/err-500, api_base: "http://$BROKEN/v1", api_key: sk-fake}}
router_settings:
  fallbacks: [{"fo-500": ["bench"]}, {"fo-close": ["bench"]}]
  num_retries: 0
  disable_cooldowns: true
litellm_settings: {num_retries: 0, telemetry: false, request_timeout: 30}
general_settings: {master_key: $LLM_KEY}
YAML
    LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR "$VENV/bin/litellm" --config "$work/litellm.yaml" \
      --host 127.0.0.1 --port "${LLM##*:}" --num_workers "$LITELLM_WORKERS" >"$work/litellm.log" 2>&1 &
    llm_pid=$!
    for _ in $(seq 1 180); do curl -sf "http://$LLM/health/liveliness" >/dev/null 2>&1 && break; sleep 0.5; done
    curl -sf "http://$LLM/health/liveliness" >/dev/null 2>&1 || { echo "LiteLLM: did not start in 90 s, skipped (see $work/litellm.log)" >&2; stop_litellm; llm_pid=; }
  else
    echo "LiteLLM: skipped: 'pip install litellm[proxy]' into $VENV failed" >&2
  fi
else
  echo "LiteLLM: skipped (LITELLM=1 adds its proxy's rows; installed into $VENV once, about 1.5 minutes)" >&2
fi
chat=("direct|$FAKE|" "nginx|$NGX|" "lean|$LEAN|" "tollgate-sqlite|$TG1|$TGK")
proxies=(nginx lean tollgate-sqlite)
[ -n "$llm_pid" ] && chat+=("litellm|$LLM|$LLM_KEY") && proxies+=(litellm)
rss_row() { local n; for n in "${proxies[@]}"; do emit "{\"s\":8,\"name\":\"$n\",\"at\":\"$1\",\"kb\":$(sc_rss "$n")}"; done; }
rss_row start

echo "== 1. overhead against concurrency" >&2
for c in $CONCS; do
  for t in "${chat[@]}"; do
    IFS='|' read -r name addr key <<<"$t"; auth_of "$key"
    r=$(sc_measure "$name" loadgen max "http://$addr/v1/chat/completions" "$SECS" "$c" 1000 --model bench --max-tokens 50 "${auth[@]}")
    emit "{\"s\":1,\"name\":\"$name\",\"conns\":$c,\"r\":$r}"
  done
done
rss_row 1

echo "== 2. streaming TTFT and jitter" >&2
for t in "${chat[@]}"; do
  IFS='|' read -r name addr key <<<"$t"; auth_of "$key"
  r=$("$BENCH" sse --url "http://$addr/v1/chat/completions" --conns "$STREAM_CONNS" --secs "$SECS" --stream --model bench --max-tokens 50 "${auth[@]}")
  emit "{\"s\":2,\"name\":\"$name\",\"r\":$r}"
done
rss_row 2

echo "== 3. tool-call delta reassembly" >&2
tools_body() { echo "{\"model\":\"$1\",\"stream\":true,\"max_tokens\":400,\"messages\":[{\"role\":\"user\",\"content\":\"Look both up.\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"lookup_0\",\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"lookup_1\",\"parameters\":{\"type\":\"object\"}}}]}"; }
deltas=("direct|http://$DELTAS/v1/chat/completions|" "nginx|http://$NGX/deltas/v1/chat/completions|" "lean|http://$LEAN_D/v1/chat/completions|" "tollgate-sqlite|http://$TG1/v1/chat/completions|$TGK")
[ -n "$llm_pid" ] && deltas+=("litellm|http://$LLM/v1/chat/completions|$LLM_KEY")
for t in "${deltas[@]}"; do
  IFS='|' read -r name url key <<<"$t"; auth_of "$key"
  r=$("$BENCH" sse --url "$url" --conns "$STREAM_CONNS" --secs 0 --check-tools --body "$(tools_body bench-deltas)" "${auth[@]}")
  emit "{\"s\":3,\"name\":\"$name\",\"r\":$r}"
done
rss_row 3

echo "== 4. overhead against prompt size" >&2
for size in $SIZES; do
  for t in "${chat[@]}"; do
    IFS='|' read -r name addr key <<<"$t"; auth_of "$key"
    r=$(sc_measure "$name" loadgen rate "http://$addr/v1/chat/completions" "$SECS" 16 "$SIZE_RPS" --model bench --max-tokens 50 --pad-to "$size" "${auth[@]}")
    emit "{\"s\":4,\"name\":\"$name\",\"size\":$size,\"r\":$r}"
  done
done
rss_row 4

echo "== 5. failover and the error path" >&2
fo=("500|direct|http://$BROKEN|bench" "500-next|nginx|http://$NGX/fo500|bench" "close-next|nginx|http://$NGX/foclose|bench"
    "500-next|tollgate-sqlite|http://$TG1|fo-500" "close-next|tollgate-sqlite|http://$TG1|fo-close"
    "500-alone|tollgate-sqlite|http://$TG1|err-500" "500-ejecting|tollgate-sqlite|http://$TG1|fo-500-ejecting")
[ -n "$llm_pid" ] && fo+=("500-next|litellm|http://$LLM|fo-500" "close-next|litellm|http://$LLM|fo-close" "500-alone|litellm|http://$LLM|err-500")
for t in "${fo[@]}"; do
  IFS='|' read -r case name base model <<<"$t"
  key=; [ "$name" = tollgate-sqlite ] && key=$TGK; [ "$name" = litellm ] && key=$LLM_KEY; auth_of "$key"
  hdr=(); [ -n "$key" ] && hdr=(-H "Authorization: Bearer $key")
  body=$("$BENCH" body --model "$model" --max-tokens 50)
  # The status it answers (its first request; then counted as done when it answers that).
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' "${hdr[@]}" -d "$body")
  r=$("$BENCH" load --url "$base/v1/chat/completions" --mode max --secs "$SECS" --conns 1 --model "$model" --max-tokens 50 --expect "$code" "${auth[@]}")
  emit "{\"s\":5,\"case\":\"$case\",\"name\":\"$name\",\"code\":$code,\"r\":$r}"
done
rss_row 5

echo "== 6. a flood of invalid keys" >&2
python3 -c "import random,string,sys
a=string.digits+string.ascii_letters
sys.stdout.write(''.join('tg_'+''.join(random.choices(a,k=40))+'\n' for _ in range(int(sys.argv[1]))))" "$BAD_KEYS" > "$work/bad-keys"
echo "not-a-key" > "$work/malformed-key"
flood=("nginx|http://$NGX/auth/v1/chat/completions|$NGX_KEY" "tollgate-sqlite|http://$TG1/v1/chat/completions|$TGK")
[ -n "$llm_pid" ] && flood+=("litellm|http://$LLM/v1/chat/completions|$LLM_KEY")
for t in "${flood[@]}"; do
  IFS='|' read -r name url key <<<"$t"
  alone=$(loadgen rate "$url" "$SECS" 8 "$VALID_RPS" --model bench --max-tokens 50 --header "Authorization: Bearer $key")
  emit "{\"s\":6,\"name\":\"$name\",\"flood\":\"none\",\"valid\":$alone}"
  for kind in malformed distinct; do
    keys=$work/bad-keys; [ "$kind" = malformed ] && keys=$work/malformed-key
    code=$(curl -s -o /dev/null -w '%{http_code}' "$url" -H "Authorization: Bearer $(head -1 "$keys")" -d "$("$BENCH" body --max-tokens 50)")
    loadgen rate "$url" "$SECS" 8 "$VALID_RPS" --model bench --max-tokens 50 --header "Authorization: Bearer $key" > "$work/valid.json" &
    v=$!
    f=$(sc_measure "$name" "$BENCH" load --url "$url" --mode max --secs "$SECS" --conns "$FLOOD_CONNS" --model bench --max-tokens 50 --keys-file "$keys" --expect "$code")
    wait "$v"
    emit "{\"s\":6,\"name\":\"$name\",\"flood\":\"$kind\",\"code\":$code,\"valid\":$(cat "$work/valid.json"),\"f\":$f}"
  done
done
rss_row 6

echo "== 7. head-of-line blocking" >&2
for t in "${chat[@]}"; do
  IFS='|' read -r name addr key <<<"$t"; auth_of "$key"
  url="http://$addr/v1/chat/completions"
  small=(--url "$url" --conns 4 --secs "$SECS" --stream --model bench --max-tokens 20 "${auth[@]}")
  alone=$("$BENCH" sse "${small[@]}")
  # The big one: one at a time, back to back, from before the small streams start to after.
  "$BENCH" load --url "$url" --mode max --conns 1 --secs "$(python3 -c "print($SECS + 0.5)")" --stream --model bench \
    --max-tokens "$BIG_TOKENS" --pad-to "$BIG_BYTES" "${auth[@]}" > "$work/big.json" &
  b=$!; sleep 0.3
  with=$("$BENCH" sse "${small[@]}")
  wait "$b"
  emit "{\"s\":7,\"name\":\"$name\",\"alone\":$alone,\"with\":$with,\"big\":$(cat "$work/big.json")}"
done
rss_row 7

python3 - "$res" "$SECS" "$SECONDS" <<'PY'
import json, os, sys
E = os.environ
rows = [json.loads(l) for l in open(sys.argv[1])]
S = lambda n: [r for r in rows if r["s"] == n]
def x(v, base):  # v as a multiple of nginx's (when nginx's is positive)
    return f"{v / base:.2f}×" if base and base > 0 else "–"
def ms(us): return f"{us / 1000:.2f}"
def table(title, head, lines):
    print(f"\n### {title}\n\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for l in lines: print("| " + " | ".join(str(c) for c in l) + " |")
def cpu(r):
    return r["cpu_us"] / max(r.get("requests", 0), 1) if "cpu_us" in r else 0
print(f"\nSECS={sys.argv[2]} per run, {sys.argv[3]} s in all; ratios (×) are to nginx's figure in the same run.")
lines = []
for c in sorted({r["conns"] for r in S(1)}):
    at = {r["name"]: r["r"] for r in S(1) if r["conns"] == c}
    d, n = at["direct"], at["nginx"]
    for name, r in at.items():
        a50, a99 = r["p50_us"] - d["p50_us"], r["p99_us"] - d["p99_us"]
        n50, n99 = n["p50_us"] - d["p50_us"], n["p99_us"] - d["p99_us"]
        proxy = name not in ("direct", "nginx")
        lines.append([c, name, f'{r["rps"]:.0f}', r["p50_us"], r["p99_us"], f"{a50} ({x(a50, n50)})" if proxy else a50,
                      f"{a99} ({x(a99, n99)})" if proxy else a99,
                      "–" if name == "direct" else f"{cpu(r):.1f}" + (f" ({x(cpu(r), cpu(n))})" if proxy else ""), r["errors"]])
table("1. Overhead against concurrency (closed loop, chat JSON)", ["conns", "target", "rps", "p50 µs", "p99 µs", "added p50 µs (× nginx's)", "added p99 µs (× nginx's)", "CPU µs/req (× nginx's)", "errors"], lines)
at = {r["name"]: r["r"] for r in S(2)}
d, n = at["direct"], at["nginx"]
lines = []
for name, r in at.items():
    add = lambda k, rr: rr[k] - d[k]
    proxy = name not in ("direct", "nginx")
    t50, t99, g99 = add("ttfc_p50_us", r), add("ttfc_p99_us", r), add("gap_p99_us", r)
    lines.append([name, r["streams"], f'{ms(r["ttfb_p50_us"])} / {ms(r["ttfb_p99_us"])}', f'{ms(r["ttfc_p50_us"])} / {ms(r["ttfc_p99_us"])}',
                  f'{t50} / {t99}' + (f' ({x(t99, add("ttfc_p99_us", n))})' if proxy else ""),
                  f'{ms(r["gap_p50_us"])} / {ms(r["gap_p99_us"])} / {ms(r["gap_max_us"])}', f"{g99}" + (f' ({x(g99, add("gap_p99_us", n))})' if proxy else ""),
                  f'{ms(r["ttlb_p99_us"])}', r["events_per_stream"], r["errors"] + r["no_content"]])
table(f'2. Streaming: {E["STREAM_CONNS"]} streams of 50 chunks {E["CHUNK_MS"]} ms apart, back to back: time to first byte / first content chunk, gaps between chunks', ["target", "streams", "TTFB p50 / p99 ms", "TTFC p50 / p99 ms", "added TTFC p50 / p99 µs (p99 × nginx's)", "gap p50 / p99 / max ms", "gap p99 − direct's µs (× nginx's)", "TTLB p99 ms", "chunks/stream", "errors"], lines)
at = {r["name"]: r["r"] for r in S(3)}
d, n = at["direct"], at["nginx"]
lines = [[name, r["streams"], f'{r["tools_ok"]} / {r["streams"]}' + (" **MISMATCH**" if r["tools_bad"] else ""), r["events_per_stream"], ms(r["ttfc_p50_us"]),
          f'{ms(r["ttlb_p50_us"])} / {ms(r["ttlb_p99_us"])}', r["ttlb_p50_us"] - d["ttlb_p50_us"],
          x(r["ttlb_p50_us"] - d["ttlb_p50_us"], n["ttlb_p50_us"] - d["ttlb_p50_us"]) if name not in ("direct", "nginx") else "–",
          ms(r["gap_p99_us"]), r["errors"]] for name, r in at.items()]
table(f'3. Tool-call deltas: {E["STREAM_CONNS"]} streams at once of 2 parallel calls, ~60 argument deltas each, 2 ms apart', ["target", "streams", "arguments reassembled exactly", "delta events/stream", "TTFC p50 ms", "TTLB p50 / p99 ms", "added TTLB p50 µs", "× nginx's", "gap p99 ms", "errors"], lines)
lines = []
for size in sorted({r["size"] for r in S(4)}):
    at = {r["name"]: r["r"] for r in S(4) if r["size"] == size}
    d, n = at["direct"], at["nginx"]
    for name, r in at.items():
        a50, n50 = r["p50_us"] - d["p50_us"], n["p50_us"] - d["p50_us"]
        proxy = name not in ("direct", "nginx")
        lines.append([f"{size // 1024} KB", name, r["p50_us"], r["p99_us"], f"{a50}" + (f" ({x(a50, n50)})" if proxy else ""),
                      "–" if name == "direct" else f"{cpu(r):.1f}" + (f" ({x(cpu(r), cpu(n))})" if proxy else ""), r["errors"]])
table(f'4. Overhead against prompt size (open loop at {E["SIZE_RPS"]} requests/s, 16 connections)', ["body", "target", "p50 µs", "p99 µs", "added p50 µs (× nginx's)", "CPU µs/req (× nginx's)", "errors"], lines)
words = {"500": "answers 500 (direct: the error's own floor)", "500-next": "answers 500, then the second provider",
         "close-next": "closes unanswered, then the second provider", "500-alone": "answers 500, no second provider",
         "500-ejecting": "answers 500, default ejection (3 failures, 30 s)"}
fo = S(5)
ngx = {r["case"]: r["r"]["p50_us"] for r in fo if r["name"] == "nginx"}
lines = [[words[r["case"]], r["name"], r["code"], r["r"]["ok"], r["r"]["p50_us"], r["r"]["p99_us"],
          x(r["r"]["p50_us"], ngx.get(r["case"])) if r["name"] != "nginx" else "–", r["r"]["errors"]] for r in fo]
table("5. Failover and the error path (closed loop, 1 connection)", ["the first provider", "target", "status", "answers", "p50 µs", "p99 µs", "p50 × nginx's", "other answers"], lines)
fl = S(6)
base = {r["name"]: r["valid"] for r in fl if r["flood"] == "none"}
# The proxy's CPU over the flood's requests and the valid ones beside it (a few hundred).
per = lambda r: r["f"]["cpu_us"] / max(r["f"]["requests"] + r["valid"]["requests"], 1)
ngf = {r["flood"]: r for r in fl if r["name"] == "nginx" and "f" in r}
lines = []
for r in fl:
    if r["flood"] == "none": continue
    f, v, b = r["f"], r["valid"], base[r["name"]]
    c = per(r)
    nf = ngf[r["flood"]]["f"] if r["flood"] in ngf else {}
    nc = per(ngf[r["flood"]]) if r["flood"] in ngf else 0
    lines.append([r["name"], r["flood"], r["code"], f'{f["rps"]:.0f}' + (f' ({x(f["rps"], nf.get("rps"))})' if r["name"] != "nginx" else ""),
                  f"{c:.1f}" + (f" ({x(c, nc)})" if r["name"] != "nginx" else ""), f'{b["p50_us"]} / {b["p99_us"]}',
                  f'{v["p50_us"]} / {v["p99_us"]}', f'{v["p50_us"] / max(b["p50_us"], 1):.2f}×', f["errors"] + v["errors"]])
table(f'6. A flood of invalid keys (closed loop, {E["FLOOD_CONNS"]} connections) beside valid traffic at {E["VALID_RPS"]} requests/s', ["target", "bad keys", "status", "answers/s (× nginx)", "CPU µs/req (× nginx's)", "valid p50 / p99 µs alone", "valid p50 / p99 µs in the flood", "valid p50 × alone", "errors"], lines)
at = {r["name"]: r for r in S(7)}
nq = at["nginx"]["with"]["ttfc_p99_us"] / max(at["nginx"]["alone"]["ttfc_p99_us"], 1)
lines = []
for name, r in at.items():
    a, w, b = r["alone"], r["with"], r["big"]
    q = w["ttfc_p99_us"] / max(a["ttfc_p99_us"], 1)
    lines.append([name, f'{ms(a["ttfb_p50_us"])} / {ms(a["ttfb_p99_us"])}', f'{ms(w["ttfb_p50_us"])} / {ms(w["ttfb_p99_us"])}',
                  f'{ms(a["ttfc_p50_us"])} / {ms(a["ttfc_p99_us"])}', f'{ms(w["ttfc_p50_us"])} / {ms(w["ttfc_p99_us"])}',
                  f"{q:.2f}×" + (f" ({x(q, nq)})" if name not in ("direct", "nginx") else ""), f'{b["ok"]} / {b["errors"]}', a["errors"] + w["errors"]])
table(f'7. Head-of-line blocking: 4 small streams alone and beside one 100k-token request ({int(E["BIG_BYTES"]) // 1000} KB prompt, {E["BIG_TOKENS"]} chunks)', ["target", "TTFB p50 / p99 ms alone", "TTFB beside the big one", "TTFC p50 / p99 ms alone", "TTFC beside the big one", "TTFC p99 × alone (× nginx's)", "big requests done / failed", "errors"], lines)
rs = S(8)
names = list(dict.fromkeys(r["name"] for r in rs))
ats = list(dict.fromkeys(r["at"] for r in rs))
kb = {(r["name"], r["at"]): r["kb"] for r in rs}
grow = lambda n: kb[(n, ats[-1])] - kb[(n, ats[0])]
lines = [[n] + [f"{kb[(n, a)] / 1024:.1f}" for a in ats] + [f"{grow(n) / 1024:+.1f}" + (f" ({x(grow(n), grow('nginx'))})" if n != "nginx" else ""),
         x(kb[(n, ats[-1])], kb[("nginx", ats[-1])]) if n != "nginx" else "–"] for n in names]
table("8. RSS of the proxy (MB): at the start and after each scenario", ["target"] + [a if a == "start" else f"after {a}" for a in ats] + ["growth MB (× nginx's)", "end × nginx"], lines)
PY
