# shellcheck shell=bash
# The setup that benches/load.sh and benches/growth.sh share (sourced, never run): tools, the
# fakes, nginx, Tollgate on a generated config with a funded account, the proxy's CPU time, and
# the load generator (ours, or oha with LOADGEN=oha). Written once so both measure the same way.
# Loopback only; everything started here is stopped on exit.

# The binaries of `cargo build` honour CARGO_TARGET_DIR; so do we.
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BENCH=$TARGET_DIR/release/tollgate-bench
LEAN_FLOOR=$TARGET_DIR/release/examples/lean_floor
TOLLGATE=$TARGET_DIR/release/tollgate
# PGO=1: the servers' profile-guided build (`bash benches/pgo.sh` makes it; the fakes and the
# load generator stay the plain build above).
if [ "${PGO:-}" = 1 ]; then
  PGO_HOST=$(rustc -vV | sed -n 's/^host: //p')
  TOLLGATE=target/pgo/$PGO_HOST/release/tollgate
  LEAN_FLOOR=target/pgo/$PGO_HOST/release/examples/lean_floor
fi
LOADGEN=${LOADGEN:-bench}
OHA_VERSION=${OHA_VERSION:-1.16.0}
ADMIN_TOKEN=bench-admin-token-0123456789abcdef
CLK_TCK=$(getconf CLK_TCK)
# shellcheck disable=SC2034 # the ports, used by the scripts that source this
FAKE=127.0.0.1:19100 NGX=127.0.0.1:19101 TG1=127.0.0.1:19102 TG2=127.0.0.1:19103 TOOLS=127.0.0.1:19104 ANTH=127.0.0.1:19105 NGX_TOOLS=127.0.0.1:19106 PGR=127.0.0.1:19107 PGR_TOOLS=127.0.0.1:19108 LEAN=127.0.0.1:19109 LEAN_TOOLS=127.0.0.1:19110

need() { command -v "$1" >/dev/null 2>&1; }

# nginx (the floor; not with `no-nginx`) and cmake (a build dependency) from Debian, then the
# two binaries.
bench_setup() { # [no-nginx]
  if [ "${1:-}" = no-nginx ]; then
    need cmake || { apt-get update -qq && apt-get install -y -qq cmake >/dev/null; }
  elif ! need nginx || ! need cmake; then
    apt-get update -qq
    if ! apt-get install -y -qq nginx-light cmake >/dev/null 2>&1; then
      apt-get install -y -qq nginx cmake >/dev/null
    fi
  fi
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  cargo build --release -p tollgate --bin tollgate --example lean_floor -p tollgate-testkit --bin tollgate-bench 2>&1 | tail -1
  if [ "${PGO:-}" = 1 ]; then
    # Brought up to date with the profile pgo.sh merged (a changed source keeps the old counts
    # where its functions still match).
    [ -f target/pgo/merged.profdata ] || { echo "PGO=1: run bash benches/pgo.sh first" >&2; exit 1; }
    CARGO_TARGET_DIR=target/pgo RUSTFLAGS="-Cprofile-use=$PWD/target/pgo/merged.profdata" \
      cargo build --release --target "$PGO_HOST" -p tollgate --bin tollgate --example lean_floor 2>&1 | tail -1
  fi
  [ "$LOADGEN" = oha ] && ensure_oha
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Bounded wait until they have gone (Tollgate's graceful shutdown takes about 2 s).
  for _ in $(seq 1 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
  if [ -n "${PGDB:-}" ]; then
    psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $PGDB WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}

# oha is not in Debian: built once from crates.io into the target dir, pinned so its flags and
# JSON stay the ones parsed below.
ensure_oha() {
  OHA=$(command -v oha || echo "$TARGET_DIR/oha/bin/oha")
  if [ ! -x "$OHA" ]; then
    echo "building oha $OHA_VERSION (once) into $TARGET_DIR/oha ..." >&2
    cargo install oha --version "$OHA_VERSION" --locked --root "$TARGET_DIR/oha" >&2
    OHA=$TARGET_DIR/oha/bin/oha
  fi
}

start_fakes() { # words delay_ms: the chat fake's reply length (chunks when streamed) and pace
  "$BENCH" fake --listen "$FAKE" --words "$1" --delay-ms "$2" 2>/dev/null & pids+=($!)
  "$BENCH" tools --listen "$TOOLS" 2>/dev/null & pids+=($!)
  "$BENCH" anthropic --listen "$ANTH" 2>/dev/null & pids+=($!)
}

# The start of every bench's nginx.conf, up to inside `http {`: two workers, its pid file where
# the scripts read it, and bodies up to the growth run's 1 MB buffered in memory as Tollgate
# does (nginx's default 16 KB buffer would spill them to temporary files, timing the disk rather
# than the proxy).
nginx_head() {
  cat <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_max_body_size 8m;
  client_body_buffer_size 2m;
NGINX
}

start_nginx() {
  { nginx_head; cat <<NGINX; } > "$work/nginx.conf"
  upstream fake { server $FAKE; keepalive 128; }
  upstream tools { server $TOOLS; keepalive 128; }
  server {
    listen $NGX;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
  # The floor for one hop in front of the fake tool server (load.sh's tools/call table).
  server {
    listen $NGX_TOOLS;
    location / {
      proxy_pass http://tools;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGINX
  "$NGINX" -c "$work/nginx.conf" -p "$work" 2>/dev/null
}

# The two floors on the framework Tollgate is built on, each in front of the chat fake and of
# the tool server, beside nginx: Pingora's own proxy with no logic (`tollgate-bench pingora`:
# pingora-proxy's generic upstream path, which Tollgate does not use), and the lean floor
# (`examples/lean_floor.rs`: Tollgate's own path with no logic: served as Tollgate is,
# after Tollgate's one-write exchange on its own idle lists). What Tollgate costs above "lean"
# is its own logic.
start_floor() {
  "$BENCH" pingora --listen "$PGR" --upstream "$FAKE" 2>/dev/null & pids+=($!)
  pingora_pid=$!
  "$BENCH" pingora --listen "$PGR_TOOLS" --upstream "$TOOLS" 2>/dev/null & pids+=($!)
  pingora_tools_pid=$!
  "$LEAN_FLOOR" --listen "$LEAN" --upstream "$FAKE" 2>/dev/null & pids+=($!)
  lean_pid=$!
  "$LEAN_FLOOR" --listen "$LEAN_TOOLS" --upstream "$TOOLS" 2>/dev/null & pids+=($!)
  lean_tools_pid=$!
  for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://$PGR/" && curl -s -o /dev/null "http://$PGR_TOOLS/" \
      && curl -s -o /dev/null "http://$LEAN/" && curl -s -o /dev/null "http://$LEAN_TOOLS/" && break
    sleep 0.1
  done
}

# Starts Tollgate (sets NAME_pid) and makes its bench account (NAME_key): limited by a business
# limit too high to reach, still checked and counted on every request, and funded.
start_tollgate() { # name listen database_url redis_url
  local name=$1 listen=$2 db=$3 redis=$4
  cat > "$work/$name.toml" <<TOML
[server]
listen = "$listen"
metrics_listen = ""
threads = ${TG_THREADS:-2}
# Pingora keeps listening through the grace period after SIGTERM: short, so the ports are free
# for the next run when this one's exit trap returns.
graceful_shutdown_secs = 1
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
[[models]]
id = "bench-emb"
provider = "fake"
kind = "embedding"
input_credits_per_1k = 0.02
output_credits_per_1k = 0
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
[abuse]
# The load generators send every invalid key from one address; a flood from many (a botnet's)
# is what the per-key defences are measured on, so the per-address limit stays out of reach
# unless a run sets it.
invalid_keys_per_minute = ${TG_INVALID_KEYS_PER_MINUTE:-1000000000}
${TG_EXTRA_TOML:-}
TOML
  TOLLGATE_BENCH_ANTHROPIC_KEY=sk-ant-bench TOLLGATE_ADMIN_TOKEN=$ADMIN_TOKEN TOLLGATE_LOG=warn "$TOLLGATE" serve --config "$work/$name.toml" 2>"$work/$name.log" &
  pids+=($!)
  eval "${name}_pid=$!"
  for _ in $(seq 1 "${TG_START_TRIES:-100}"); do
    curl -sf "http://$listen/readyz" 2>/dev/null | grep -q '"ledger":true' && break
    sleep 0.1
  done
  local signup uid key
  signup=$(curl -sf "http://$listen/api/v1/auth/signup" -d "{\"email\":\"$name-$$@example.com\",\"password\":\"benchmark1\"}")
  uid=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["user_id"])')
  key=$(echo "$signup" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
  curl -sf -X PUT "http://$listen/api/v1/admin/accounts/$uid/plan" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"plan":"business","requests_per_hour":1000000000}' >/dev/null
  curl -sf "http://$listen/api/v1/admin/accounts/$uid/credits" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"delta":100000000,"reason":"bench"}' >/dev/null
  eval "${name}_key=$key"
}

# The bench account at ADDR registers the fake tool server as `bench-tools`, 1 credit a call,
# and the admin approves it: what every tools/call bench measures through.
register_bench_tools() { # addr key
  curl -sf "http://$1/api/v1/mcp/services" -H "Authorization: Bearer $2" \
    -d "{\"slug\":\"bench-tools\",\"upstream_url\":\"http://$TOOLS/mcp\",\"default_credits\":1}" >/dev/null
  curl -sf -X POST "http://$1/api/v1/admin/mcp/services/bench-tools/approve" -H "Authorization: Bearer $ADMIN_TOKEN" >/dev/null
}

# The processes that are the proxy under test: nginx's workers (its master serves no request),
# Tollgate's one process (its threads are counted in it); none for direct.
proxy_pids() { # target name
  case $1 in
    nginx) ps -o pid= --ppid "$(cat "$work/nginx.pid")" | tr '\n' ' ' ;;
    pingora) echo "${pingora_pid:-}" ;;
    pingora-tools) echo "${pingora_tools_pid:-}" ;;
    lean) echo "${lean_pid:-}" ;;
    lean-tools) echo "${lean_tools_pid:-}" ;;
    tollgate-sqlite) echo "${tg_sqlite_pid:-}" ;;
    tollgate-postgres-redis) echo "${tg_pg_pid:-}" ;;
    tollgate-traced-default) echo "${tg_traced_default_pid:-}" ;;
    tollgate-traced-all) echo "${tg_traced_all_pid:-}" ;;
    tollgate-no-request-log) echo "${tg_no_log_pid:-}" ;;
    # benches/caching.sh's rows: tg_sqlite's, and its instance with Redis counters.
    sqlite-*) echo "${tg_sqlite_pid:-}" ;;
    redis-*) echo "${tg_cache_redis_pid:-}" ;;
  esac
}

rss_of() { # target name: KB resident, summed over its processes
  local p; p=$(proxy_pids "$1")
  if [ -z "$p" ]; then echo 0; return; fi
  # shellcheck disable=SC2086 # one pid a word
  ps -o rss= -p "$(echo $p | tr ' ' ',')" | awk '{s+=$1} END {print s+0}'
}

# utime + stime (clock ticks) of the target's processes, from /proc/PID/stat: fields 14 and 15,
# counted after the ")" that ends the command name (which may hold spaces).
cpu_ticks() { # target name
  local total=0 p f
  for p in $(proxy_pids "$1"); do
    f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
    # shellcheck disable=SC2086 # the fields, split
    set -- $f
    total=$((total + ${12} + ${13}))
  done
  echo "$total"
}

# Runs a load command and prints its JSON line with `cpu_us`: the CPU time the proxy used
# while it ran (0 for direct). Divided by the run's requests, it is the CPU cost of one.
measure() { # target command...
  local name=$1 before after out; shift
  before=$(cpu_ticks "$name")
  out=$("$@")
  after=$(cpu_ticks "$name")
  echo "${out%\}},\"cpu_us\":$(((after - before) * 1000000 / CLK_TCK))}"
}

# One rate or max run as one JSON line in tollgate-bench's shape: by tollgate-bench, or with
# LOADGEN=oha by oha (given the very bytes tollgate-bench would send: `tollgate-bench body`).
loadgen() { # rate|max URL SECS CONNS RPS [tollgate-bench load options: --header, --model, ...]
  local mode=$1 url=$2 secs=$3 conns=$4 rps=$5; shift 5
  if [ "$LOADGEN" != oha ]; then
    "$BENCH" load --url "$url" --mode "$mode" --secs "$secs" --conns "$conns" --rps "$rps" "$@"
    return
  fi
  local headers=() shape=() pace=()
  while [ $# -gt 0 ]; do
    case $1 in
      --header) headers+=(-H "$2"); shift 2 ;;
      *) shape+=("$1"); shift ;;
    esac
  done
  # A file, not -d: a command-line argument is limited to 128 KB.
  "$BENCH" body "${shape[@]}" > "$work/oha-body"
  # Open loop with latency counted from each request's scheduled time, as ours does.
  [ "$mode" = rate ] && pace=(-q "$rps" --latency-correction)
  # -w: requests still running at the deadline finish and count (the proxy did their work),
  # as with ours. OHA_ARGS adds flags, e.g. --worker-threads 1.
  # shellcheck disable=SC2086 # OHA_ARGS is words
  "$OHA" --no-tui --output-format json -z "${secs}s" -w -c "$conns" "${pace[@]}" -m POST \
    -T application/json "${headers[@]}" -D "$work/oha-body" ${OHA_ARGS:-} "$url" | python3 -c '
import json, sys
mode, url = sys.argv[1], sys.argv[2]
j = json.load(sys.stdin)
codes = {str(k): v for k, v in j.get("statusCodeDistribution", {}).items()}
ok = codes.get("200", 0)
# Non-200 answers and failed requests are errors (none is cut off by the deadline with -w).
errors = sum(v for k, v in codes.items() if k != "200")
errors += sum(v for k, v in j.get("errorDistribution", {}).items() if "deadline" not in k)
p = j.get("latencyPercentiles", {})
us = lambda s: int(round((s or 0) * 1e6))
secs = j["summary"].get("total") or 1
path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
print(json.dumps({"mode": mode, "path": path, "ok": ok, "errors": errors, "requests": ok + errors,
    "rps": round(ok / secs, 1), "p50_us": us(p.get("p50")), "p99_us": us(p.get("p99")),
    "max_us": us(j["summary"].get("slowest"))}, separators=(",", ":")))
' "$mode" "$url"
}

# Idle client connections (issue 31's memory goal): COUNT TCP connections to the target that
# send nothing (the proxy has accepted them and waits for a first byte), then closed. One JSON
# line: the target's resident KB before, with them open (read after IDLE_HOLD s, once the
# proxy has accepted them all) and after they close; KB per connection; and whether the memory
# came back: read every 0.25 s for up to IDLE_SETTLE s (jemalloc returns freed pages after about
# a second), "returned" once at most a fifth of the growth (or 1 MB) is left.
idle_conns() { # target addr count
  local p; p=$(proxy_pids "$1")
  # shellcheck disable=SC2086 # one pid an argument
  python3 - "$2" "$3" "${IDLE_HOLD:-1}" "${IDLE_SETTLE:-3}" $p <<'PY'
import json, resource, socket, sys, time
addr, count, hold, settle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
pids = sys.argv[5:]
host, port = addr.rsplit(":", 1)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < count + 100:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 100), hard))
def rss():
    kb = 0
    for p in pids:
        try:
            kb += next(int(l.split()[1]) for l in open(f"/proc/{p}/status") if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return kb
before = rss()
socks = []
try:
    for _ in range(count):
        socks.append(socket.create_connection((host, int(port)), timeout=5))
except OSError:
    pass  # fewer opened: `opened` says how many
time.sleep(hold)
held = rss()
for s in socks:
    s.close()
grown = max(held - before, 0)
began = time.monotonic()
while True:
    after = rss()
    returned = after - before <= max(grown // 5, 1024)
    if returned or time.monotonic() - began >= settle:
        break
    time.sleep(0.25)
print(json.dumps({"conns": count, "opened": len(socks), "before_kb": before, "open_kb": held,
    "after_kb": after, "kb_each": round(grown / max(len(socks), 1), 1), "returned": returned,
    "settle_s": round(time.monotonic() - began, 2)}, separators=(",", ":")))
PY
}

# Runs chat completions (JSON) against each target in turn, for ROUNDS rounds (default 3) so
# that the machine's drift falls on all of them alike: p50/p99 at a fixed rate, then max rps and
# the proxy's CPU per request on 64 connections, one JSON line per target and round in OUT.
# A target: "name|address|header;header…" (its headers, the key's Authorization among them).
interleaved_rows() { # what OUT target…
  local what=$1 out=$2 round t name addr hdrs h url; shift 2
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for t in "$@"; do
      IFS='|' read -r name addr hdrs <<<"$t"
      local args=(--model bench)
      IFS=';' read -ra hs <<<"$hdrs"
      for h in "${hs[@]}"; do args+=(--header "$h"); done
      url="http://$addr/v1/chat/completions"
      echo "== $what round $round: $name" >&2
      rate=$(loadgen rate "$url" "$RATE_SECS" 64 "$RPS" "${args[@]}")
      max=$(measure "$name" loadgen max "$url" "$MAX_SECS" 64 "$RPS" "${args[@]}")
      echo "{\"name\":\"$name\",\"round\":$round,\"rate\":$rate,\"max\":$max}" >> "$out"
    done
  done
}

# The table of interleaved_rows' OUT: each target's medians and its CPU per request against its
# base target's in the same round (the median of the rounds). ROWS: a JSON list of
# [name, label, base name]; TITLE heads the first column; GOAL is printed under the table.
interleaved_table() { # OUT ROWS TITLE GOAL
  python3 - "$@" <<'PY'
import json, sys
from statistics import median
out, spec, title, goal = sys.argv[1:5]
rows = [json.loads(l) for l in open(out)]
def cpu(r): return r["max"]["cpu_us"] / max(r["max"].get("requests", 0), 1)
by = {(r["name"], r["round"]): r for r in rows}
rounds = sorted({r["round"] for r in rows})
print()
print(f"| {title} | p50 / p99 µs @rate (median) | max rps @64 conns (median) | CPU µs/req (median) | × its base (median of rounds) | errors |")
print("|---|---|---|---|---|---|")
for name, label, base in json.loads(spec):
    rs = [by[(name, k)] for k in rounds if (name, k) in by]
    if not rs:
        continue
    ratio = median(cpu(by[(name, k)]) / cpu(by[(base, k)]) for k in rounds if (name, k) in by and (base, k) in by)
    p50 = median(r["rate"]["p50_us"] for r in rs)
    p99 = median(r["rate"]["p99_us"] for r in rs)
    rps = median(r["max"]["rps"] for r in rs)
    errors = sum(r["rate"]["errors"] + r["max"]["errors"] for r in rs)
    print(f'| {label} | {p50:.0f} / {p99:.0f} | {rps:.0f} | {median(cpu(r) for r in rs):.1f} | {ratio:.3f}× | {errors} |')
print()
print(goal)
PY
}
