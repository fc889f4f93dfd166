#!/usr/bin/env python3
"""Soak run of the release exporter: steady appends with rotation, a journald unit whose
journalctl child is killed, a flapping Pushgateway, a scrape every second. Run by bench/soak.sh.

Usage: soak.py --bin target/release/sglang-log-exporter [--duration 1h] [--dir /tmp/sglang-soak]

What it runs, all on 127.0.0.1, all in --dir:

* a file writer: 8 ranks (DP0-7 TP0-7) of a PD decode server, each printing about 2 decode and 1
  prefill stats lines a second (the lines bench/genlog.py writes, with the current time), plus
  about 8 uvicorn access lines a second; the file is rotated every --rotate-every seconds,
  alternating rename + create (the writer goes on writing to the renamed file for a moment, as a
  logging handler does until it reopens) and copytruncate; rotated files are kept (soak.log.N);
* a journal written by the real systemd-journal-remote from samples/journal-export.txt, then
  appended to every 2 s with the decode unit's new entries (its current invocation), followed by
  `--journal-unit sglang-decode`; its journalctl child (found with pgrep -P) is killed with
  SIGKILL every --kill-every seconds;
* a real prometheus-pushgateway, pushed to every 5 s, stopped for --flap-down seconds every
  --flap-every seconds;
* a scrape of /metrics every second.

It records RSS, open fds, threads, series in the scrape, lines written and read (file and
journal), pushes and push failures, journalctl kills and restarts every --row-every seconds into
soak.csv, and prints a start/end table. Lines are counted exactly: a file line is every line in
soak.log and its rotated copies (checked against the writer's own count); a journal line is every
entry of the unit's current invocation (checked with journalctl). Exit 1 if a line was lost or
read twice, the exporter died, or the final push group was not deleted on SIGTERM.
"""

import argparse
import csv
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
UNIT = "sglang-decode.service"
BOOT = "6f1c2a9e4b7d4e0fa3c85d1e2b9f7a64"
# The decode unit's current invocation in samples/journal-export.txt.
INVOCATION = "0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"
RANKS = 8
PATHS = ["/generate", "/v1/chat/completions", "/v1/completions", "/health"]


def parse_duration(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {s!r}: e.g. 3600, 90s, 10m, 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stamp(t=None):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def decode_line(rnd, d):
    tokens = rnd.randrange(0, 786432)
    return (
        f"[{stamp()} DP{d} TP{d}] Decode batch, #running-req: {rnd.randrange(0, 256)}, "
        f"#token: {tokens}, token usage: {tokens / 786432:.2f}, pre-allocated usage: 0.00, "
        f"#prealloc-req: {rnd.randrange(0, 4)}, #transfer-req: {rnd.randrange(0, 8)}, "
        f"#retracted-req: 0, cuda graph: True, gen throughput (token/s): "
        f"{rnd.random() * 5000:.2f}, #queue-req: {rnd.randrange(0, 64)}"
    )


def prefill_line(rnd, d):
    new = rnd.randrange(1, 16384)
    return (
        f"[{stamp()} DP{d} TP{d}] Prefill batch, #new-seq: {rnd.randrange(1, 8)}, #new-token: {new}, "
        f"#cached-token: {rnd.randrange(0, new)}, token usage: {rnd.random():.2f}, "
        f"#running-req: {rnd.randrange(0, 8)}, #queue-req: {rnd.randrange(0, 32)}, "
        f"#pending-token: 0, #bootstrap-req: 0, #inflight-req: {rnd.randrange(0, 4)}, "
        f"cuda graph: False, input throughput (token/s): {rnd.random() * 20000:.2f}"
    )


def access_line(rnd):
    p = PATHS[rnd.randrange(len(PATHS))]
    meth = "GET" if p == "/health" else "POST"
    return f'[{stamp()}] INFO:     127.0.0.1:{rnd.randrange(30000, 65000)} - "{meth} {p} HTTP/1.1" 200 OK'


def startup_lines():
    out = [
        f"[{stamp()}] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', "
        "served_model_name='deepseek-ai/DeepSeek-V3', tp_size=8, pp_size=1, dp_size=8, "
        "enable_dp_attention=True, disaggregation_mode='decode')"
    ]
    for d in range(RANKS):
        out.append(f"[{stamp()} DP{d} TP{d}] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB")
        out.append(
            f"[{stamp()} DP{d} TP{d}] max_total_num_tokens=786432, chunked_prefill_size=16384, "
            "max_prefill_tokens=16384, max_running_requests=256, context_len=163840, "
            "available_gpu_mem=46.91 GB"
        )
    return out


class FileWriter(threading.Thread):
    """Appends at SGLang's rate and rotates; counts every line it writes."""

    def __init__(self, path, rotate_every, truncate_gap, stop):
        super().__init__(daemon=True)
        self.path, self.rotate_every, self.stop = path, rotate_every, stop
        self.truncate_gap = truncate_gap
        self.rnd = random.Random(42)
        self.written = 0
        self.rotations = {"rename": 0, "copytruncate": 0}
        self.f = open(path, "a", buffering=1)
        self.write(startup_lines())

    def write(self, lines, f=None):
        (f or self.f).write("".join(line + "\n" for line in lines))
        (f or self.f).flush()
        self.written += len(lines)

    def batch(self):
        # 0.1 s of output: each rank ~2 decode and ~1 prefill lines a second, ~8 access lines.
        rnd, out = self.rnd, []
        for d in range(RANKS):
            if rnd.random() < 0.2:
                out.append(decode_line(rnd, d))
            if rnd.random() < 0.1:
                out.append(prefill_line(rnd, d))
        if rnd.random() < 0.8:
            out.append(access_line(rnd))
        return out

    def rotate(self):
        n = sum(self.rotations.values()) + 1
        dest = f"{self.path}.{n}"
        if n % 2:
            os.rename(self.path, dest)
            # A logging handler writes to the renamed file until it notices and reopens.
            time.sleep(0.1)
            self.write(self.batch())
            self.f.close()
            self.f = open(self.path, "a", buffering=1)
            self.rotations["rename"] += 1
        else:
            shutil.copyfile(self.path, dest)
            os.truncate(self.path, 0)
            self.rotations["copytruncate"] += 1

    def run(self):
        next_rot = time.monotonic() + self.rotate_every
        tick = time.monotonic()
        while not self.stop.is_set():
            self.write(self.batch())
            if time.monotonic() >= next_rot:
                # logrotate's copytruncate erases whatever was appended since the follower's
                # last read: a truncate within a millisecond of a write loses lines for any
                # follower (tail -F included). Rotate a little after the last write.
                time.sleep(self.truncate_gap)
                self.rotate()
                next_rot += self.rotate_every
            tick += 0.1
            time.sleep(max(0.0, tick - time.monotonic()))
        self.f.close()

    def lines_on_disk(self):
        total = 0
        for p in [self.path] + glob.glob(self.path + ".*"):
            with open(p, "rb") as f:
                total += f.read().count(b"\n")
        return total


def export_entry(realtime_us, message):
    return (
        f"__REALTIME_TIMESTAMP={realtime_us}\n__MONOTONIC_TIMESTAMP={realtime_us - 1_770_000_000_000_000}\n"
        f"_BOOT_ID={BOOT}\n_HOSTNAME=gpu-node-1\n_TRANSPORT=stdout\nPRIORITY=6\n"
        f"SYSLOG_IDENTIFIER=python3\n_PID=48213\n_SYSTEMD_UNIT={UNIT}\n"
        f"_SYSTEMD_INVOCATION_ID={INVOCATION}\nMESSAGE={message}\n\n"
    ).encode()


def journal_remote(path, export):
    r = subprocess.run(
        [JOURNAL_REMOTE, f"--output={path}", "-"], input=export, capture_output=True
    )
    if r.returncode != 0:
        raise RuntimeError(f"systemd-journal-remote: {r.stderr.decode(errors='replace')}")


def journal_entries(path):
    """Entries of the decode unit's current invocation, as journalctl counts them."""
    r = subprocess.run(
        ["journalctl", f"--file={path}", f"_SYSTEMD_UNIT={UNIT}",
         f"_SYSTEMD_INVOCATION_ID={INVOCATION}", "-o", "json", "--all", "--no-pager"],
        capture_output=True, check=True,
    )
    return r.stdout.count(b"\n")


class JournalWriter(threading.Thread):
    """Appends the decode unit's entries through systemd-journal-remote every 2 s."""

    def __init__(self, path, stop):
        super().__init__(daemon=True)
        self.path, self.stop = path, stop
        self.rnd = random.Random(7)
        self.appended = 0
        self.errors = 0

    def run(self):
        while not self.stop.wait(2.0):
            now_us = int(time.time() * 1e6)
            msgs = [decode_line(self.rnd, d) for d in range(2) for _ in range(2)]
            msgs.append(access_line(self.rnd))
            export = b"".join(export_entry(now_us + i, m) for i, m in enumerate(msgs))
            try:
                journal_remote(self.path, export)
                self.appended += len(msgs)
            except RuntimeError as e:
                self.errors += 1
                print(e, file=sys.stderr)


class Pushgateway:
    def __init__(self, port, log):
        self.port, self.log = port, log
        self.proc = None
        self.stops = 0

    def start(self):
        self.proc = subprocess.Popen(
            ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{self.port}",
             "--persistence.file="],
            stdout=self.log, stderr=self.log,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the pushgateway did not start")

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None
            self.stops += 1

    def metrics(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()


def proc_stats(pid):
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds, threads


def sample_value(text, name, labels=None):
    """The sum of the samples of `name` whose label text contains `labels`."""
    total, found = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        rest = line[len(name):]
        if rest[:1] not in ("{", " "):
            continue
        if labels and labels not in rest:
            continue
        total += float(line.rsplit(" ", 1)[1])
        found = True
    return total if found else None


def series_count(text):
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/sglang-log-exporter")
    ap.add_argument("--duration", type=parse_duration, default=3600.0)
    ap.add_argument("--dir", default="/tmp/sglang-soak")
    ap.add_argument("--rotate-every", type=parse_duration, default=60.0)
    ap.add_argument("--kill-every", type=parse_duration, default=600.0)
    ap.add_argument("--flap-every", type=parse_duration, default=180.0)
    ap.add_argument("--flap-down", type=parse_duration, default=20.0)
    ap.add_argument("--truncate-gap", type=parse_duration, default=0.05,
                    help="seconds between the last write and a rotation (0: logrotate's race)")
    ap.add_argument("--row-every", type=parse_duration, default=60.0)
    ap.add_argument("--sample", default=os.path.join(os.path.dirname(__file__), "..", "samples", "journal-export.txt"))
    a = ap.parse_args()

    if os.path.exists(a.dir):
        shutil.rmtree(a.dir)
    os.makedirs(a.dir)
    for tool in (JOURNAL_REMOTE, shutil.which("journalctl"), shutil.which("prometheus-pushgateway")):
        if not tool or not os.path.exists(tool):
            sys.exit("needs systemd-journal-remote, journalctl and prometheus-pushgateway (Debian packages)")
    log_path = os.path.join(a.dir, "soak.log")
    journal = os.path.join(a.dir, "soak.journal")
    journal_remote(journal, open(a.sample, "rb").read())

    stop = threading.Event()
    pg_log = open(os.path.join(a.dir, "pushgateway.log"), "ab")
    pg = Pushgateway(free_port(), pg_log)
    pg.start()
    web = free_port()
    fw = FileWriter(log_path, a.rotate_every, a.truncate_gap, stop)
    jw = JournalWriter(journal, stop)
    exp_log = open(os.path.join(a.dir, "exporter.log"), "wb")
    exporter = subprocess.Popen(
        [a.bin, f"soak={log_path}", "--journal-unit", "sglang-decode", "--journal-file", journal,
         "--push.url", f"http://127.0.0.1:{pg.port}", "--push.interval", "5s",
         "--push.instance", "soak", "--web.listen-address", f"127.0.0.1:{web}", "--gpu.disable"],
        stdout=exp_log, stderr=exp_log,
    )
    url = f"http://127.0.0.1:{web}/metrics"
    file_src = f'source="{log_path}"'
    journal_src = f'source="journald:{UNIT}"'

    def scrape():
        t0 = time.monotonic()
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        return text, (time.monotonic() - t0) * 1000

    deadline = time.monotonic() + 10
    while True:
        try:
            scrape()
            break
        except OSError:
            if time.monotonic() > deadline or exporter.poll() is not None:
                sys.exit("the exporter did not start; see " + exp_log.name)
            time.sleep(0.1)
    fw.start()
    jw.start()
    kills = 0
    journal_base = journal_entries(journal)
    rows = []
    scrape_failures, scrape_ms_max = 0, 0.0
    fields = ["elapsed_s", "rss_kib", "fds", "threads", "series", "file_lines_written",
              "file_lines_read", "journal_entries", "journal_lines_read", "pushes",
              "push_failures", "pushgateway_stops", "journalctl_kills", "journalctl_restarts",
              "scrape_failures", "scrape_ms_max"]
    out_csv = open(os.path.join(a.dir, "soak.csv"), "w", newline="")
    w = csv.DictWriter(out_csv, fieldnames=fields)
    w.writeheader()

    def row(text, elapsed):
        rss, fds, threads = proc_stats(exporter.pid)
        r = {
            "elapsed_s": round(elapsed),
            "rss_kib": rss, "fds": fds, "threads": threads,
            "series": series_count(text),
            "file_lines_written": fw.written,
            "file_lines_read": int(sample_value(text, "sglang_log_exporter_lines_read_total", file_src) or 0),
            "journal_entries": journal_base + jw.appended,
            "journal_lines_read": int(sample_value(text, "sglang_log_exporter_lines_read_total", journal_src) or 0),
            "pushes": int(sample_value(text, "sglang_log_exporter_pushes_total") or 0),
            "push_failures": int(sample_value(text, "sglang_log_exporter_push_failures_total") or 0),
            "pushgateway_stops": pg.stops,
            "journalctl_kills": kills,
            "journalctl_restarts": int(sample_value(text, "sglang_log_exporter_journalctl_restarts_total") or 0),
            "scrape_failures": scrape_failures,
            "scrape_ms_max": round(scrape_ms_max, 1),
        }
        w.writerow(r)
        out_csv.flush()
        rows.append(r)
        print(" ".join(f"{k}={v}" for k, v in r.items()), flush=True)
        return r

    start = time.monotonic()
    text, _ = scrape()
    row(text, 0)
    next_row = start + a.row_every
    next_kill = start + a.kill_every
    next_flap = start + a.flap_every
    flap_until = None
    ok = True
    while time.monotonic() - start < a.duration:
        now = time.monotonic()
        if exporter.poll() is not None:
            print(f"the exporter died: exit {exporter.returncode}", file=sys.stderr)
            ok = False
            break
        try:
            text, ms = scrape()
            scrape_ms_max = max(scrape_ms_max, ms)
        except OSError as e:
            scrape_failures += 1
            print(f"scrape failed: {e}", file=sys.stderr)
        if now >= next_kill:
            kids = subprocess.run(["pgrep", "-P", str(exporter.pid), "-x", "journalctl"],
                                  capture_output=True, text=True).stdout.split()
            for k in kids:
                os.kill(int(k), signal.SIGKILL)
                kills += 1
            next_kill += a.kill_every
        if flap_until is None and now >= next_flap:
            pg.stop()
            flap_until = now + a.flap_down
            next_flap += a.flap_every
        elif flap_until is not None and now >= flap_until:
            pg.start()
            flap_until = None
        if now >= next_row:
            row(text, now - start)
            next_row += a.row_every
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))

    # The end: stop writing, let the exporter catch up, take the last figures, stop it.
    stop.set()
    fw.join()
    jw.join()
    if pg.proc is None:
        pg.start()
    on_disk = fw.lines_on_disk()
    journal_total = journal_entries(journal)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text, _ = scrape()
        f_read = sample_value(text, "sglang_log_exporter_lines_read_total", file_src)
        j_read = sample_value(text, "sglang_log_exporter_lines_read_total", journal_src)
        if f_read == on_disk and j_read == journal_total:
            break
        time.sleep(1)
    time.sleep(6)  # one more push with the pushgateway up
    text, _ = scrape()
    last = row(text, time.monotonic() - start)
    group_pushed = 'instance="soak"' in pg.metrics()
    exporter.send_signal(signal.SIGTERM)
    try:
        code = exporter.wait(15)
    except subprocess.TimeoutExpired:
        exporter.kill()
        code = "killed after 15 s"
    group_deleted = 'instance="soak"' not in pg.metrics()
    pg.stop()
    first = rows[0]
    warn = sum(1 for line in open(exp_log.name, errors="replace") if " WARN " in line)
    errs = sum(1 for line in open(exp_log.name, errors="replace") if " ERROR " in line)

    print()
    print(f"soak: {round(time.monotonic() - start)} s, {fw.rotations['rename']} rename and "
          f"{fw.rotations['copytruncate']} copytruncate rotations, {kills} journalctl kills, "
          f"{pg.stops} pushgateway stops (the last at the end)")
    print("| measure | start | end |\n|---|---:|---:|")
    for k, label in [("rss_kib", "RSS (KiB)"), ("fds", "open fds"), ("threads", "threads"),
                     ("series", "series in the scrape")]:
        print(f"| {label} | {first[k]} | {last[k]} |")
    rss_max = max(r["rss_kib"] for r in rows)
    print(f"| RSS max over the rows (KiB) | | {rss_max} |")
    print(f"| file lines written (writer / on disk, all rotated files) | | {fw.written} / {on_disk} |")
    print(f"| file lines read (`lines_read_total`) | | {last['file_lines_read']} |")
    print(f"| journal entries (current invocation, journalctl) | {journal_base} | {journal_total} |")
    print(f"| journal lines read (`lines_read_total`) | | {last['journal_lines_read']} |")
    print(f"| pushes / push failures | | {last['pushes']} / {last['push_failures']} |")
    print(f"| journalctl kills / restarts counted | | {kills} / {last['journalctl_restarts']} |")
    print(f"| scrapes failed / slowest (ms) | | {scrape_failures} / {round(scrape_ms_max, 1)} |")
    print(f"| exporter warnings / errors logged | | {warn} / {errs} |")
    print(f"| exit on SIGTERM / push group deleted | | {code} / {group_deleted} |")
    lost_file = on_disk - last["file_lines_read"]
    lost_journal = journal_total - last["journal_lines_read"]
    print(f"lost lines: file {lost_file}, journal {lost_journal} (negative: read twice)")
    summary = {"first": first, "last": last, "rss_max": rss_max, "rotations": fw.rotations,
               "kills": kills, "pushgateway_stops": pg.stops, "lost_file": lost_file,
               "lost_journal": lost_journal, "written": fw.written, "on_disk": on_disk,
               "journal_total": journal_total, "exit": code, "group_pushed": group_pushed,
               "group_deleted": group_deleted, "warnings": warn, "errors": errs}
    json.dump(summary, open(os.path.join(a.dir, "summary.json"), "w"), indent=1)
    ok = ok and lost_file == 0 and lost_journal == 0 and fw.written == on_disk
    ok = ok and code == 0 and group_pushed and group_deleted and jw.errors == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
