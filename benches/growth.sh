#!/usr/bin/env bash
# How the proxy's cost grows (issue 16), in one run on this machine: direct to the fast fake
# provider | nginx as a plain reverse proxy | Tollgate on SQLite (auth, rate limiting and credit
# metering on, as in load.sh), each closed loop for GROWTH_SECS (5 s) a row, along four axes:
#   connections   1, 8, 64, 512: added p50/p99 over direct, throughput
#   request body  1 KB, 100 KB, 1 MB (the user message padded), 64 connections: throughput and
#                 body MB/s (requests/s × body bytes), vs nginx
#   stream length 10, 100, 1,000 chunks, 64 connections, no pause between chunks: time to last
#                 byte p50/p99, the proxy's CPU µs per chunk
#   accounts      1, 100, 10,000 distinct accounts (written into the ledger before the runs),
#                 each request with the next one's key (round-robin), 64 connections: added
#                 p50/p99 over direct, throughput (key cache, limiter and lease maps)
# and every row has the proxy's CPU µs per request (utime + stime from /proc over the requests
# the run completed); then, for nginx and Tollgate,
#   idle          500, 2,000 client connections that send nothing: KB each, and whether the
#                 memory returns after they close (lib.sh's idle_conns, as in load.sh)
# Prints five markdown tables. About 3.5 minutes with the defaults; the axes and durations are
# overridable: GROWTH_SECS, CONNS, BODIES (bytes), CHUNKS, ACCOUNTS, IDLE (connections),
# GROWTH_CONNS (the other axes' connections). The load generator is tollgate-bench throughout
# (the accounts rows need its --keys-file), so rows compare with each other.
set -euo pipefail
cd "$(dirname "$0")/.."
GROWTH_SECS=${GROWTH_SECS:-5} GROWTH_CONNS=${GROWTH_CONNS:-64}
CONNS=${CONNS:-"1 8 64 512"} BODIES=${BODIES:-"1024 102400 1048576"}
CHUNKS=${CHUNKS:-"10 100 1000"} ACCOUNTS=${ACCOUNTS:-"1 100 10000"} IDLE=${IDLE:-"500 2000"}
LOADGEN=bench
# The JSON rows ask for the 50 words load.sh's fake answers; the stream rows for their length.
WORDS=50

most() { printf '%s\n' "$@" | sort -n | tail -1; }
# shellcheck disable=SC2086 # the lists, split
max_chunks=$(most $CHUNKS) max_accounts=$(most $ACCOUNTS)

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup
# Replies as long as the longest stream row, at full speed; every request caps it by max_tokens.
start_fakes "$max_chunks" 0
start_nginx
start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""

# The accounts are written straight into the ledger, with the three statements of
# Ledger::create_account (account, its grant in the credit ledger, its key: SHA-256 of a
# `tg_` + 40 base62 key), set up as load.sh's bench account (business, a limit too high to
# reach, still checked and counted; funded). No route makes accounts faster: sign-up hashes a
# password with argon2, one per core at a time, ~25 ms each here, 4 minutes for 10,000.
echo "== $max_accounts accounts" >&2
python3 - "$work/ledger.db" "$max_accounts" "$work/keys" <<'PY'
import hashlib, secrets, sqlite3, string, sys, time
db, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
alphabet = string.digits + string.ascii_uppercase + string.ascii_lowercase
now, grant = int(time.time() * 1000), 100_000_000 * 1_000_000
conn = sqlite3.connect(db, timeout=30)
keys = []
with conn:
    for i in range(count):
        uid, key = f"usr_growth{i:05d}", "tg_" + "".join(secrets.choice(alphabet) for _ in range(40))
        conn.execute("INSERT INTO accounts (user_id, email, password_hash, plan, balance, requests_per_hour, created_at) VALUES (?, ?, NULL, 'business', ?, 1000000000, ?)",
                     (uid, f"growth-{i}@example.com", grant, now))
        conn.execute("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES (?, ?, 'bench grant', 'system', ?)",
                     (uid, grant, now))
        conn.execute("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, 'default', ?, ?, ?)",
                     (f"key_growth{i:05d}", uid, key[:8], hashlib.sha256(key.encode()).hexdigest(), now))
        keys.append(key)
open(out, "w").write("\n".join(keys) + "\n")
PY
# A seeded key must work like a signed-up one; a bad seed would show as errors in every row.
curl -sf "http://$TG1/v1/chat/completions" -H "Authorization: Bearer $(head -n1 "$work/keys")" \
  -d '{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":5}' >/dev/null ||
  { echo "a seeded key was refused; the ledger's schema has changed?" >&2; exit 1; }

rows="$work/rows.jsonl"
run() { # axis value target tollgate-bench-load-options...: one closed-loop row
  local axis=$1 value=$2 name=$3 addr out auth=(); shift 3
  case $name in
    direct) addr=$FAKE ;;
    nginx) addr=$NGX ;;
    *) addr=$TG1
      # The bench account's key unless the row brings its own.
      case " $* " in *" --keys-file "*) ;; *) auth=(--header "Authorization: Bearer $tg_sqlite_key") ;; esac ;;
  esac
  echo "== $axis $value $name" >&2
  out=$(measure "$name" "$BENCH" load --url "http://$addr/v1/chat/completions" --mode max \
    --secs "$GROWTH_SECS" --model bench "${auth[@]}" "$@")
  echo "{\"axis\":\"$axis\",\"value\":$value,\"name\":\"$name\",\"run\":$out}" >> "$rows"
}
each() { # axis value tollgate-bench-load-options...: the row of every target
  local t
  for t in direct nginx tollgate-sqlite; do run "$1" "$2" "$t" "${@:3}"; done
}

for c in $CONNS; do each conns "$c" --conns "$c" --max-tokens "$WORDS"; done
for b in $BODIES; do each body "$b" --conns "$GROWTH_CONNS" --max-tokens "$WORDS" --pad-to "$b"; done
for k in $CHUNKS; do each chunks "$k" --conns "$GROWTH_CONNS" --stream --max-tokens "$k"; done
# Direct and nginx never look at the key: one row each stands for every count.
run accounts 0 direct --conns "$GROWTH_CONNS" --max-tokens "$WORDS"
run accounts 0 nginx --conns "$GROWTH_CONNS" --max-tokens "$WORDS"
for a in $ACCOUNTS; do
  head -n "$a" "$work/keys" > "$work/keys-$a"
  run accounts "$a" tollgate-sqlite --conns "$GROWTH_CONNS" --max-tokens "$WORDS" --keys-file "$work/keys-$a"
done
for i in $IDLE; do
  for name in nginx tollgate-sqlite; do
    echo "== idle $i $name" >&2
    addr=$NGX
    [ "$name" = nginx ] || addr=$TG1
    echo "{\"axis\":\"idle\",\"value\":$i,\"name\":\"$name\",\"idle\":$(idle_conns "$name" "$addr" "$i")}" >> "$rows"
  done
done

python3 - "$rows" "$GROWTH_CONNS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
conns = sys.argv[2]
def get(axis, value, name):
    for r in rows:
        if r["axis"] == axis and r["value"] == value and r["name"] == name:
            return r["run"]
def per(r, n=1):
    # CPU µs of the proxy per request (or per chunk: n chunks a request).
    return r["cpu_us"] / max(r["requests"] * n, 1)
def x(a, b, fmt="{:.0f}"):
    return (fmt.format(a) + (f" ({a / b:.2f}×)" if b else "")).strip()
def size(b):
    return f"{b // 1048576} MB" if b >= 1048576 else f"{b // 1024} KB"
def table(axis, label, cols, cells, values_of=None):
    values = values_of or sorted({r["value"] for r in rows if r["axis"] == axis})
    print()
    print(f"| {label} | target | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for v in values:
        for name in ("direct", "nginx", "tollgate-sqlite"):
            r = get(axis, v, name)
            if r is not None:
                print(f"| {v if axis != 'body' else size(v)} | {name} | " + " | ".join(cells(v, name, r)) + " |")
def latency_cells(axis, base_value=lambda v: v):
    def cells(v, name, r):
        d = get(axis, base_value(v), "direct")
        n = get(axis, base_value(v), "nginx")
        if name == "direct":
            lat = f'{r["p50_us"]} / {r["p99_us"]} (itself)'
            cpu = "–"
        else:
            lat = f'{r["p50_us"] - d["p50_us"]} / {r["p99_us"] - d["p99_us"]}'
            nb = per(n) if name != "nginx" else 0
            cpu = x(per(r), nb, "{:.1f}")
        rps = x(r["rps"], n["rps"] if name == "tollgate-sqlite" else 0)
        return [lat, rps, cpu, str(r["errors"])]
    return cells
cols = ["added p50 / p99 µs", "requests/s (× nginx)", "CPU µs/req (× nginx's)", "errors"]
print("### Connections (closed loop)")
table("conns", "connections", cols, latency_cells("conns"))
print()
print(f"### Request body ({conns} connections)")
def body_cells(v, name, r):
    n = get("body", v, "nginx")
    mbs = r["rps"] * v / 1e6
    nb = name not in ("direct", "nginx")
    cpu = "–" if name == "direct" else x(per(r), per(n) if nb else 0, "{:.1f}")
    return [x(r["rps"], n["rps"] if nb else 0), x(mbs, n["rps"] * v / 1e6 if nb else 0, "{:.1f}"),
            f'{r["p50_us"]} / {r["p99_us"]}', cpu, str(r["errors"])]
table("body", "body", ["requests/s (× nginx)", "body MB/s (× nginx)", "p50 / p99 µs", "CPU µs/req (× nginx's)", "errors"], body_cells)
print()
print(f"### Stream length ({conns} connections, no pause between chunks)")
def chunk_cells(v, name, r):
    n = get("chunks", v, "nginx")
    nb = name not in ("direct", "nginx")
    cpu = "–" if name == "direct" else x(per(r, v), per(n, v) if nb else 0, "{:.2f}")
    return [f'{r["p50_us"] / 1000:.1f} / {r["p99_us"] / 1000:.1f}', x(r["rps"], n["rps"] if nb else 0),
            cpu, "–" if name == "direct" else f"{per(r):.1f}", str(r["errors"])]
table("chunks", "chunks", ["TTLB p50 / p99 ms", "streams/s (× nginx)", "CPU µs/chunk (× nginx's)", "CPU µs/req", "errors"], chunk_cells)
print()
print(f"### Distinct accounts ({conns} connections, round-robin keys)")
accounts = sorted({r["value"] for r in rows if r["axis"] == "accounts" and r["value"]})
def account_rows():
    print()
    print("| accounts | target | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    cells = latency_cells("accounts", lambda v: 0)
    for name in ("direct", "nginx"):
        print(f"| any | {name} | " + " | ".join(cells(0, name, get("accounts", 0, name))) + " |")
    for a in accounts:
        print(f"| {a:,} | tollgate-sqlite | " + " | ".join(cells(a, "tollgate-sqlite", get("accounts", a, "tollgate-sqlite"))) + " |")
account_rows()
print()
print("### Idle client connections (sending nothing, then closed)")
print()
print("| connections | target | KB each | RSS MB before → open → after close | returned |")
print("|---|---|---|---|---|")
for r in rows:
    if r["axis"] == "idle":
        i = r["idle"]
        opened = f' ({i["opened"]} opened)' if i["opened"] < i["conns"] else ""
        print(f'| {r["value"]:,}{opened} | {r["name"]} | {i["kb_each"]:.1f} | {i["before_kb"] / 1024:.1f} → {i["open_kb"] / 1024:.1f} → {i["after_kb"] / 1024:.1f} | {"yes" if i["returned"] else "no"} ({i["settle_s"]} s) |')
PY
