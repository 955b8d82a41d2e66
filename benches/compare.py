#!/usr/bin/env python3
"""keylock (native scripts on, and off) vs redis-server, measured with
`keylock bench --json` in one run on one machine.

Builds keylock in release mode, starts three servers on free loopback ports
(keylock, keylock --native-scripts no, and Debian's redis-server), and runs
each workload against all three, rotating the server order workload by
workload and round by round so that changes in machine load fall on every
column alike; the median of the rounds is reported. Then:

- persistence: lock-acquire by EVALSHA (50 clients, pipeline 16 and 1)
  against keylock (native scripts) and redis-server, both with
  `--appendonly yes` and `--appendfsync everysec`, then both with
  `--appendfsync always`; four servers, each in a fresh directory of its
  own, the pair's order rotated row by row and round by round; median of
  the rounds, keylock/redis ratio and the p99 of each;
- memory: 1,000,000 Redisson locks held (lock-acquire over 1,000,000 names
  in sequence, 10-minute lease) in a fresh keylock and a fresh redis-server,
  and the resident set size (VmRSS) of each before and after;
- RDB: the same 1,000,000 locks in a fresh keylock and a fresh redis-server
  (each in its own directory, `--save ""`), then the wall time of SAVE, the
  size of dump.rdb, and the load time: SHUTDOWN NOSAVE, then from spawning
  the server again on that directory until DBSIZE answers 1000000
  (retried while the connection is refused or the reply is LOADING);
- start-up: time from spawning the server to its first accepted
  connection, median of --startup-runs;
- the load generator itself: `keylock bench` and `redis-benchmark` against
  the same redis-server (ping and hset, 50 clients, pipeline 1 and 16),
  with the CPU time each generator spent per request.

Prints markdown. Needs cargo, redis-server and redis-benchmark on PATH.

Usage: benches/compare.py [--duration 3s] [--rounds 3] [--no-build]
       [--skip-throughput] [--skip-persistence] [--skip-memory] [--skip-rdb]
       [--skip-startup] [--skip-generator]
"""
import argparse, json, os, platform, shutil, socket, statistics, subprocess, sys, tempfile, time

from benchlib import KEYLOCK, ROOT, free_port

# (label, bench arguments). Clients and pipeline are read back from the summary.
WORKLOADS = [
    ("lock-acquire", ["lock-acquire", "-c", "50", "-P", "16"]),
    ("lock-acquire", ["lock-acquire", "-c", "50", "-P", "1"]),
    ("lock-cycle", ["lock-cycle", "-c", "50", "-P", "1"]),
    ("lock-cycle", ["lock-cycle", "-c", "50", "-P", "16"]),
    ("lock-contended", ["lock-contended", "-c", "50"]),
    ("rwlock-cycle", ["rwlock-cycle", "-c", "50", "-P", "16"]),
    ("semaphore-cycle", ["semaphore-cycle", "-c", "50", "-P", "16"]),
    ("hset", ["hset", "-c", "50", "-P", "1"]),
    ("hset", ["hset", "-c", "50", "-P", "16"]),
    ("ping", ["ping", "-c", "50", "-P", "1"]),
    ("ping", ["ping", "-c", "50", "-P", "16"]),
]
SERVERS = ["redis", "keylock-native", "keylock-lua"]

# The append-only file rows: lock-acquire by EVALSHA (keylock bench's default script mode).
PERSIST_POLICIES = ["everysec", "always"]
PERSIST_PIPELINES = [16, 1]
PERSIST_SERVERS = ["redis", "keylock-native"]
HELD_LOCKS = 1000000


def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
        return True
    except OSError:
        return False


class Server:
    """A server process on a free port, stopped by stop(). With persist (a
    list of redis-server flags, `--dir` among them) both kinds get exactly
    those flags; without, redis-server runs with no snapshot, no AOF and tmp
    as its dir, and keylock with its defaults (which save nothing)."""

    def __init__(self, kind, tmp, persist=None):
        self.kind = kind
        self.port = free_port()
        if kind == "redis":
            argv = ["redis-server", "--port", str(self.port)]
            argv += persist if persist is not None else ["--save", "", "--appendonly", "no", "--dir", tmp]
        else:
            argv = [KEYLOCK, "--port", str(self.port)] + (persist or [])
            if kind == "keylock-lua":
                argv += ["--native-scripts", "no"]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, timeout=10.0):
        """Seconds from spawn to the first accepted connection."""
        deadline = self.started + timeout
        while not connects(self.port):
            if time.perf_counter() > deadline or self.proc.poll() is not None:
                sys.exit("%s on port %d did not start" % (self.kind, self.port))
            time.sleep(0.0005)
        return time.perf_counter() - self.started

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def read_reply(f):
    """One RESP2 reply from the file f: str for simple strings, int, bytes
    or None for bulk strings, a list for arrays; an error reply is returned
    as RespError. None at end of stream too (the server closed)."""
    line = f.readline()
    if not line:
        return None
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise ValueError("not RESP: %r" % line)


class RespError(str):
    pass


class Conn:
    """One plain RESP2 connection, one command at a time."""

    def __init__(self, port, timeout=600.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def call(self, *args):
        req = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in (x if isinstance(x, bytes) else str(x).encode() for x in args))
        self.sock.sendall(req)
        return read_reply(self.f)

    def close(self):
        self.f.close()
        self.sock.close()


def run_measured(argv):
    """Runs argv to its end; returns (stdout, exit status, stderr). Once
    reaped, its CPU time shows in os.times()'s children fields."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    return out, proc.returncode, err


def bench(port, args):
    argv = [KEYLOCK, "bench", "--target", "127.0.0.1:%d" % port, "--json", "--quiet"] + args
    before = os.times()
    out, code, err = run_measured(argv)
    after = os.times()
    if code != 0:
        sys.exit("keylock bench %s failed (%d): %s%s" % (" ".join(args), code, err, out))
    summary = json.loads(out)
    summary["_cpu_s"] = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return summary


def version_line():
    keylock = subprocess.run([KEYLOCK, "--version"], capture_output=True, text=True).stdout.strip()
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return "%d cores (%s), %s at %s, redis-server %s, %s" % (
        os.cpu_count(), model or platform.machine(), keylock, rev or "?", redis, platform.platform())


def ratio(a, b):
    return "%.2f" % (a / b) if b else "-"


def throughput(args, tmp):
    servers = {kind: Server(kind, tmp) for kind in SERVERS}
    try:
        for s in servers.values():
            s.wait_ready()
        samples = {}  # (row index, server) -> [summary]
        for r in range(args.rounds):
            for i, (_, bench_args) in enumerate(WORKLOADS):
                order = SERVERS[(i + r) % 3:] + SERVERS[:(i + r) % 3]
                for kind in order:
                    summary = bench(servers[kind].port, bench_args + ["--duration", args.duration, "--threads", "1"])
                    samples.setdefault((i, kind), []).append(summary)
    finally:
        for s in servers.values():
            s.stop()
    print("| workload | clients | pipeline | redis ops/s | keylock-native ops/s | keylock-lua ops/s "
          "| native/redis | lua/redis | p99 ms redis / native / lua | client max/min redis / native / lua |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for i, (label, _) in enumerate(WORKLOADS):
        med = {k: statistics.median(s["ops_per_sec"] for s in samples[(i, k)]) for k in SERVERS}
        p99 = {k: statistics.median(s["latency_us"]["p99"] for s in samples[(i, k)]) / 1000 for k in SERVERS}
        spread = {k: statistics.median(s["client_ops_max"] / max(s["client_ops_min"], 1) for s in samples[(i, k)])
                  for k in SERVERS}
        first = samples[(i, "redis")][0]
        print("| %s | %d | %d | %.0f | %.0f | %.0f | %s | %s | %.2f / %.2f / %.2f | %.1f / %.1f / %.1f |" % (
            label, first["clients"], first["pipeline"], med["redis"], med["keylock-native"], med["keylock-lua"],
            ratio(med["keylock-native"], med["redis"]), ratio(med["keylock-lua"], med["redis"]),
            p99["redis"], p99["keylock-native"], p99["keylock-lua"],
            spread["redis"], spread["keylock-native"], spread["keylock-lua"]))
    print()
    print("ops/s: median of %d rounds of %s each, `--threads 1`. An op is one command for lock-acquire, "
          "hset and ping; acquire + unlock (+ latch DEL) for the cycles, a contended acquire counting as one op; "
          "`lock()` with its wait + `unlock()` for lock-contended. client max/min: the most ops one client got "
          "through over the fewest (1.0 = every connection served alike)." % (args.rounds, args.duration))


def hold_locks(port):
    """Takes HELD_LOCKS Redisson locks, one per name in sequence, with a
    10-minute lease; returns the bench summary."""
    summary = bench(port, ["lock-acquire", "--keys", str(HELD_LOCKS), "--requests", str(HELD_LOCKS), "--key-order", "seq",
                           "--lease-ms", "600000", "-c", "50", "-P", "16"])
    if summary["ops"] != HELD_LOCKS or summary["errors"]:
        sys.exit("lock fill incomplete: %r" % summary)
    return summary


def persistence(args, tmp):
    """lock-acquire with the append-only file on, per fsync policy."""
    servers = {}  # (policy, kind) -> Server
    dirs = []
    try:
        for policy in PERSIST_POLICIES:
            for kind in PERSIST_SERVERS:
                d = tempfile.mkdtemp(prefix="aof-%s-%s-" % (policy, kind), dir=tmp)
                dirs.append(d)
                servers[(policy, kind)] = Server(kind, tmp, ["--save", "", "--appendonly", "yes",
                                                             "--appendfsync", policy, "--dir", d])
        for s in servers.values():
            s.wait_ready()
        rows = [(policy, p) for policy in PERSIST_POLICIES for p in PERSIST_PIPELINES]
        samples = {}  # (row index, server) -> [summary]
        for r in range(args.rounds):
            for i, (policy, p) in enumerate(rows):
                n = len(PERSIST_SERVERS)
                order = PERSIST_SERVERS[(i + r) % n:] + PERSIST_SERVERS[:(i + r) % n]
                for kind in order:
                    summary = bench(servers[(policy, kind)].port,
                                    ["lock-acquire", "--script-mode", "evalsha", "-c", "50", "-P", str(p),
                                     "--duration", args.duration, "--threads", "1"])
                    samples.setdefault((i, kind), []).append(summary)
    finally:
        for s in servers.values():
            s.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    print("| lock-acquire, appendonly yes | clients | pipeline | redis ops/s | keylock-native ops/s | native/redis "
          "| p99 ms redis / native |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for i, (policy, p) in enumerate(rows):
        med = {k: statistics.median(s["ops_per_sec"] for s in samples[(i, k)]) for k in PERSIST_SERVERS}
        p99 = {k: statistics.median(s["latency_us"]["p99"] for s in samples[(i, k)]) / 1000 for k in PERSIST_SERVERS}
        print("| appendfsync %s | 50 | %d | %.0f | %.0f | %s | %.2f / %.2f |" % (
            policy, p, med["redis"], med["keylock-native"], ratio(med["keylock-native"], med["redis"]),
            p99["redis"], p99["keylock-native"]))
    print()
    print("Redisson's lock-acquire by EVALSHA, both servers with `--appendonly yes --appendfsync POLICY "
          "--save \"\"`, each in a fresh directory of its own (one server per policy and kind, all four "
          "running through the rounds); median of %d rounds of %s each, the order of the two servers "
          "alternating row by row and round by round." % (args.rounds, args.duration))


def rdb(args, tmp):
    """SAVE and load time of a snapshot holding HELD_LOCKS locks."""
    rows = {}
    for kind in PERSIST_SERVERS:
        d = tempfile.mkdtemp(prefix="rdb-%s-" % kind, dir=tmp)
        flags = ["--save", "", "--appendonly", "no", "--dir", d]
        try:
            server = Server(kind, tmp, flags)
            try:
                server.wait_ready()
                hold_locks(server.port)
                conn = Conn(server.port)
                started = time.perf_counter()
                reply = conn.call("SAVE")
                save_s = time.perf_counter() - started
                if reply != "OK":
                    sys.exit("%s: SAVE answered %r" % (kind, reply))
                size = os.path.getsize(os.path.join(d, "dump.rdb"))
                try:
                    reply = conn.call("SHUTDOWN", "NOSAVE")  # None: the server closed the connection
                except OSError:
                    reply = None
                if reply is not None:
                    sys.exit("%s: SHUTDOWN NOSAVE answered %r" % (kind, reply))
                conn.close()
                server.proc.wait(timeout=60)
            finally:
                server.stop()
            server = Server(kind, tmp, flags)
            try:
                load_s = wait_loaded(server, HELD_LOCKS)
            finally:
                server.stop()
            rows[kind] = (save_s, load_s, size)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    print("| %s held locks, RDB | SAVE | load | dump.rdb |" % format(HELD_LOCKS, ","))
    print("|---|---:|---:|---:|")
    for kind in PERSIST_SERVERS:
        save_s, load_s, size = rows[kind]
        print("| %s | %.2f s | %.2f s | %.1f MiB |" % (kind, save_s, load_s, size / 2**20))
    k, r = rows["keylock-native"], rows["redis"]
    print("| keylock/redis | %s | %s | %s |" % (ratio(k[0], r[0]), ratio(k[1], r[1]), ratio(k[2], r[2])))
    print()
    print("Each server in a fresh directory with `--save \"\" --appendonly no`, filled as in the memory "
          "section. SAVE: the wall time of the command. load: SHUTDOWN NOSAVE, then from spawning the server "
          "on the same directory until DBSIZE answers %d (retried on refused connections and LOADING)." % HELD_LOCKS)


def wait_loaded(server, keys, timeout=300.0):
    """Seconds from the server's spawn until DBSIZE answers keys."""
    deadline = server.started + timeout
    last = None
    while True:
        if time.perf_counter() > deadline or server.proc.poll() is not None:
            sys.exit("%s on port %d did not load %d keys (last reply %r)" % (server.kind, server.port, keys, last))
        try:
            conn = Conn(server.port, timeout=timeout)
        except OSError:
            time.sleep(0.0005)
            continue
        try:
            while time.perf_counter() <= deadline:
                last = conn.call("DBSIZE")
                if last == keys:
                    return time.perf_counter() - server.started
                if last is None:
                    break
                time.sleep(0.001)
        except OSError:
            pass
        finally:
            conn.close()


def memory(args, tmp):
    print("| 1,000,000 held locks | RSS before | RSS after | per lock | load time |")
    print("|---|---:|---:|---:|---:|")
    rss = {}
    for kind in ["redis", "keylock-native"]:
        server = Server(kind, tmp)
        try:
            server.wait_ready()
            before = server.rss_kib()
            summary = hold_locks(server.port)
            time.sleep(0.5)
            after = server.rss_kib()
            rss[kind] = after
            print("| %s | %.1f MiB | %.1f MiB | %.0f B | %.1f s |" % (
                kind, before / 1024, after / 1024, (after - before) * 1024 / 1e6, summary["elapsed_s"]))
        finally:
            server.stop()
    print()
    print("keylock/redis RSS with the locks held: %s" % ratio(rss["keylock-native"], rss["redis"]))


def startup(args, tmp):
    print("| start-up to first connection | median | min | max |")
    print("|---|---:|---:|---:|")
    for kind in ["redis", "keylock-native"]:
        times = []
        for _ in range(args.startup_runs):
            server = Server(kind, tmp)
            try:
                times.append(server.wait_ready())
            finally:
                server.stop()
        print("| %s | %.2f ms | %.2f ms | %.2f ms |" % (
            kind, statistics.median(times) * 1e3, min(times) * 1e3, max(times) * 1e3))
    print()
    print("%d runs each: spawn, then connect every 0.5 ms until accepted." % args.startup_runs)


def generator(args, tmp):
    server = Server("redis", tmp)
    rows = []
    try:
        server.wait_ready()
        for p, n in [(1, args.generator_requests), (16, args.generator_requests * 10)]:
            for test in ["ping", "hset"]:
                ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
                for _ in range(args.rounds):
                    s = bench(server.port, [test, "-c", "50", "-P", str(p), "-n", str(n), "--threads", "1"])
                    ours.append(s["ops_per_sec"])
                    ours_cpu.append(s["_cpu_s"] / n * 1e6)
                    before = os.times()
                    out, code, err = run_measured(
                        ["redis-benchmark", "-p", str(server.port), "-c", "50", "-P", str(p), "-n", str(n), "-t",
                         "ping_mbulk" if test == "ping" else test, "-q"])
                    after = os.times()
                    if code != 0:
                        sys.exit("redis-benchmark failed: %s" % err)
                    rps = [float(l.split(": ")[1].split()[0]) for l in out.replace("\r", "\n").splitlines()
                           if "requests per second" in l and ("MBULK" in l or test.upper() + ":" in l)]
                    theirs.append(rps[-1])
                    theirs_cpu.append(((after.children_user - before.children_user) +
                                       (after.children_system - before.children_system)) / n * 1e6)
                rows.append((test, p, statistics.median(ours), statistics.median(theirs),
                             statistics.median(ours_cpu), statistics.median(theirs_cpu)))
    finally:
        server.stop()
    print("| against redis-server | clients | pipeline | keylock bench req/s | redis-benchmark req/s | ratio "
          "| keylock bench CPU µs/req | redis-benchmark CPU µs/req |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for test, p, ours, theirs, ours_cpu, theirs_cpu in rows:
        print("| %s | 50 | %d | %.0f | %.0f | %s | %.2f | %.2f |" % (
            test, p, ours, theirs, ratio(ours, theirs), ours_cpu, theirs_cpu))
    print()
    print("Both generators alternate against one redis-server, median of %d rounds; ping is PING_MBULK for "
          "redis-benchmark. CPU is the generator process's user + system time per request." % args.rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", default="3s", help="each throughput measurement (keylock bench --duration)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--startup-runs", type=int, default=20)
    ap.add_argument("--generator-requests", type=int, default=200000, help="-n at pipeline 1 (x10 at pipeline 16)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-startup", action="store_true")
    ap.add_argument("--skip-generator", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-persistence", action="store_true", help="the lock-acquire rows with the append-only file")
    ap.add_argument("--skip-rdb", action="store_true", help="SAVE and load time of 1,000,000 held locks")
    args = ap.parse_args()

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--bin", "keylock"], cwd=ROOT, check=True)
    if not os.path.exists(KEYLOCK):
        sys.exit("no %s: build it first (cargo build --release)" % KEYLOCK)
    tmp = tempfile.mkdtemp()
    print("# keylock vs redis-server, `keylock bench`")
    print()
    print(version_line())
    print()
    if not args.skip_throughput:
        throughput(args, tmp)
        print()
    if not args.skip_persistence:
        persistence(args, tmp)
        print()
    if not args.skip_memory:
        memory(args, tmp)
        print()
    if not args.skip_rdb:
        rdb(args, tmp)
        print()
    if not args.skip_startup:
        startup(args, tmp)
        print()
    if not args.skip_generator:
        generator(args, tmp)


if __name__ == "__main__":
    main()
