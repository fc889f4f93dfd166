#!/usr/bin/env bash
# The inputs of the 23rd hostile pass, measured (README "Bounds"): label values of any length
# (F3: 64 kubectl --prefix engines naming pods of 200 KB; a state file holding a server with a
# 40 MB name), restored ranks crowding out the inputs' own (F4: 16 servers x 2,000 ranks in the
# state file), and a long partial last line per followed file (F5: 256 globbed files each ending
# in a 1,000,000-byte line with no newline; S=100 for short ones).
# Usage: [B=path/to/binary] [S=1000000] bench/bounds.sh   (ports 29250-29253 on 127.0.0.1)
set -euo pipefail
B=${B:-$(cd "$(dirname "$0")/.." && pwd)/target/release/sglang-log-exporter}
S=${S:-1000000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
hwm() { awk '/VmHWM/{print $2}' "/proc/$1/status"; }
stats='Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0'

# F3: long engine labels.
python3 -c "
import time
t = time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())
for e in range(64):
    print('[pod/%s%d/sglang] [%s TP0] $stats' % ('p' * 200000, e, t))
" > "$W/f3.log"
/usr/bin/time -f "F3 --once: %e s, peak RSS %M KB" "$B" --once --gpu.disable --timezone UTC \
  --log.level error "$W/f3.log" 2> "$W/time" > "$W/f3.prom"
echo "$(tail -1 "$W/time"), exposition $(wc -c < "$W/f3.prom") bytes"
"$B" --gpu.disable --timezone UTC --log.level error --web.listen-address 127.0.0.1:29250 "$W/f3.log" & P=$!
sleep 4
echo "F3 live: scrape $(curl -s 127.0.0.1:29250/metrics | wc -c) bytes, /api/v1/status $(curl -s 127.0.0.1:29250/api/v1/status | wc -c) bytes, RSS $(rss $P) KB"
kill $P; wait $P || true

# F3: a state file holding a server with a 40 MB name.
mkdir "$W/st"
python3 -c "
import json, sys
sys.stdout.write(json.dumps({'version': 1, 'journal_cursors': {}, 'servers': [{'server': 's' * 40000000, 'engine': '', 'args': None, 'facts': {'kv_pool_capacity_tokens': 5.0}, 'last_seen': 1.0, 'ranks': []}]}))
" > "$W/st/state.json"
echo "[$(date -u '+%F %T') TP0] $stats" > "$W/s.log"
"$B" --gpu.disable --log.level error --web.listen-address 127.0.0.1:29251 --state.dir "$W/st" "$W/s.log" & P=$!
sleep 4
echo "F3 state file: scrape $(curl -s 127.0.0.1:29251/metrics | wc -c) bytes, RSS $(rss $P) KB"
kill $P; wait $P || true

# F4: restored ranks and the input's own TP0.
mkdir "$W/c"
echo "[2026-11-30 15:00:00 TP0] $stats" > "$W/c.log"
python3 -c "
import json
r = lambda t: {'dp': None, 'pp': None, 'attn_cp': None, 'moe_dp': None, 'tp': t, 'ep': None, 'facts': {'kv_pool_capacity_tokens': 1000.0}}
json.dump({'version': 1, 'journal_cursors': {}, 'servers': [{'server': 's%d' % s, 'engine': '', 'args': None, 'facts': {}, 'last_seen': 1.0, 'ranks': [r(t) for t in range(2000)]} for s in range(16)]}, open('$W/c/state.json', 'w'))"
echo "F4 --once: $("$B" --once --gpu.disable --log.level error --state.dir "$W/c" "$W/c.log" | grep -E '^(sglang:num_running_reqs|sglang_log_exporter_(series_dropped|restored_gave_way))' | tr '\n' ' ')"

# F5: partial last lines.
mkdir "$W/g"
python3 -c "
for i in range(256):
    open('$W/g/f%d.log' % i, 'w').write('[2026-11-30 15:00:00 TP0] $stats\n' + 'x' * $S)
"
"$B" --gpu.disable --timezone UTC --log.level error --web.listen-address 127.0.0.1:29253 --input.glob "$W/g/*.log" & P=$!
sleep 8
echo "F5: 256 files, each ending in a $S-byte partial line: RSS $(rss $P) KB, peak $(hwm $P) KB"
kill $P; wait $P || true
