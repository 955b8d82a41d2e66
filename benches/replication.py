#!/usr/bin/env python3
"""Replicated lock throughput: a 3-member keylock Raft shard against a
single keylock and against redis-server with one replica and WAIT, measured
with `keylock bench --json` in one run on one machine.

The setups, all on loopback:

- keylock: one server, defaults (nothing persisted, nothing replicated);
- keylock shard: three members (`--replication raft`), the load on the
  leader; every write's reply waits until a majority holds it, each
  member syncing its log before it counts;
- keylock shard + WAIT 1: the same, each command followed by `WAIT 1 1000`
  (`keylock bench --wait 1`), as Redisson sends it with
  `checkLockSyncedSlaves`;
- keylock shard, raft-fsync no, + WAIT 1: the same with `--raft-fsync no`,
  an entry counting once the members wrote it (the durability of a Redis
  master and replica: a write held by two processes, on no disk yet);
- redis + replica, WAIT 1: redis-server 7 (no persistence) and a replica
  (`--replicaof`), each command followed by `WAIT 1 1000`;
- redis + replica, AOF always, WAIT 1: the same with `--appendonly yes
  --appendfsync always` on both, the nearest Redis gets to a write held
  on two disks before its acknowledgement (WAIT only says the replica
  received it).

Each workload runs against every setup in turn, the order rotated round by
round; the median of the rounds is reported, with p99 latency, as a
markdown table and the shard's ratios to the others.

Usage: benches/replication.py [--duration 3s] [--rounds 3] [--no-build]
Needs cargo and redis-server on PATH.
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

from benchlib import KEYLOCK, ROOT, free_port

WORKLOADS = [
    ("lock-acquire", ["lock-acquire", "-c", "50", "-P", "1"]),
    ("lock-cycle", ["lock-cycle", "-c", "50", "-P", "1"]),
    ("lock-acquire", ["lock-acquire", "-c", "50", "-P", "16"]),
    ("lock-cycle", ["lock-cycle", "-c", "50", "-P", "16"]),
]

# (label, setup, extra bench arguments)
COLUMNS = [
    ("keylock", "keylock", []),
    ("keylock shard", "shard", []),
    ("keylock shard + WAIT 1", "shard", ["--wait", "1"]),
    ("keylock shard, raft-fsync no, + WAIT 1", "shard-no", ["--wait", "1"]),
    ("redis + replica, WAIT 1", "redis", ["--wait", "1"]),
    ("redis + replica, AOF always, WAIT 1", "redis-aof", ["--wait", "1"]),
]


def call(port, *args):
    """One command on a fresh connection; the raw reply text."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)))
        data = b""
        while True:
            chunk = s.recv(65536)
            data += chunk
            if not chunk or data.endswith(b"\r\n") and (not data.startswith(b"$") or data.count(b"\r\n") >= 2):
                return data.decode(errors="replace")


def info_field(port, field):
    try:
        text = call(port, "INFO", "replication")
    except OSError:
        return ""
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return ""


def wait_for(what, check, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.1)
    sys.exit("timed out waiting for " + what)


class Setup:
    """The processes of one setup and the port the load goes to."""

    def __init__(self, kind, tmp):
        self.procs = []
        self.kind = kind
        if kind == "keylock":
            self.port = self.spawn([KEYLOCK, "--port", "%d"], tmp, "keylock")
        elif kind in ("shard", "shard-no"):
            fsync = ["--raft-fsync", "no"] if kind == "shard-no" else []
            ports = [(free_port(), free_port()) for _ in range(3)]
            members = " ".join("%d=127.0.0.1:%d:%d" % (i + 1, p, r) for i, (p, r) in enumerate(ports))
            for i, (p, _) in enumerate(ports):
                d = os.path.join(tmp, "member%d" % (i + 1))
                os.makedirs(d)
                self.spawn([KEYLOCK, "--port", str(p), "--replication", "raft", "--raft-id", str(i + 1),
                            "--raft-members", members, "--dir", d] + fsync, d, None, port=p)
            wait_for("a shard leader",
                     lambda: sum(info_field(p, "raft_role") == "leader" for p, _ in ports) == 1)
            self.port = next(p for p, _ in ports if info_field(p, "raft_role") == "leader")
        else:
            aof = ["--appendonly", "yes", "--appendfsync", "always"] if kind == "redis-aof" else ["--appendonly", "no"]
            master_dir, replica_dir = os.path.join(tmp, "master"), os.path.join(tmp, "replica")
            os.makedirs(master_dir)
            os.makedirs(replica_dir)
            self.port = self.spawn(["redis-server", "--port", "%d", "--save", "", "--dir", master_dir] + aof, tmp, "redis")
            replica = self.spawn(["redis-server", "--port", "%d", "--save", "", "--dir", replica_dir,
                                  "--replicaof", "127.0.0.1", str(self.port)] + aof, tmp, "redis")
            wait_for("the replica to sync", lambda: info_field(replica, "master_link_status") == "up")

    def spawn(self, argv, cwd, kind, port=None):
        port = port or free_port()
        argv = [str(port) if a == "%d" else a for a in argv]
        log = open(os.path.join(cwd, "server-%d.log" % port), "w")
        self.procs.append(subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT))
        wait_for("port %d" % port, lambda: info_field(port, "role") != "")
        return port

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def server_logs(tmp):
    """The last lines of every server's log, for a run that failed."""
    out = []
    for root, _, files in os.walk(tmp):
        for f in sorted(files):
            if f.startswith("server-") and f.endswith(".log"):
                with open(os.path.join(root, f), errors="replace") as fh:
                    out.append("== %s\n%s" % (os.path.join(root, f), "".join(fh.readlines()[-15:])))
    return "\n".join(out)


def bench(port, args, col, tmp):
    argv = [KEYLOCK, "bench", "--target", "127.0.0.1:%d" % port, "--json", "--quiet"] + args
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        print(server_logs(tmp), file=sys.stderr)
        sys.exit("keylock bench %s against %s failed (%d): %s%s" % (" ".join(args), col, out.returncode, out.stderr, out.stdout))
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if not shutil.which("redis-server"):
        sys.exit("redis-server is not on PATH")
    tmp = tempfile.mkdtemp(prefix="keylock-replication-")
    setups = {}
    try:
        for _, kind, _ in COLUMNS:
            if kind not in setups:
                os.makedirs(os.path.join(tmp, kind))
                setups[kind] = Setup(kind, os.path.join(tmp, kind))
        results = {}
        for w, (label, wargs) in enumerate(WORKLOADS):
            for r in range(args.rounds):
                order = COLUMNS[(w + r) % len(COLUMNS):] + COLUMNS[:(w + r) % len(COLUMNS)]
                for col, kind, extra in order:
                    s = bench(setups[kind].port, wargs + extra + ["--duration", args.duration], col, tmp)
                    if s["errors"] or s["unexpected"]:
                        sys.exit("%s on %s: %d errors, %d unexpected: %s %s" % (
                            label, col, s["errors"], s["unexpected"], s.get("first_error"), s.get("first_unexpected")))
                    results.setdefault((w, col), []).append(s)
        print("| workload | " + " | ".join(c for c, _, _ in COLUMNS) + " |")
        print("|---|" + "---:|" * len(COLUMNS))
        for w, (label, wargs) in enumerate(WORKLOADS):
            cells = []
            for col, _, _ in COLUMNS:
                runs = results[(w, col)]
                ops = statistics.median(s["ops_per_sec"] for s in runs)
                p99 = statistics.median(s["latency_us"]["p99"] for s in runs)
                cells.append("%s/s (p99 %.2f ms)" % ("{:,.0f}".format(ops), p99 / 1000))
            print("| %s -c %s -P %s | %s |" % (label, wargs[2], wargs[4], " | ".join(cells)))
        print()
        for w, (label, wargs) in enumerate(WORKLOADS):
            med = {col: statistics.median(s["ops_per_sec"] for s in results[(w, col)]) for col, _, _ in COLUMNS}
            shard = med["keylock shard + WAIT 1"]
            unsynced = med["keylock shard, raft-fsync no, + WAIT 1"]
            print("- %s -P %s: shard + WAIT 1 / redis + replica WAIT 1 = %.2f, / redis AOF always = %.2f;"
                  " raft-fsync no + WAIT 1 / redis + replica WAIT 1 = %.2f; shard / single keylock = %.2f" % (
                label, wargs[4], shard / med["redis + replica, WAIT 1"],
                shard / med["redis + replica, AOF always, WAIT 1"],
                unsynced / med["redis + replica, WAIT 1"], med["keylock shard"] / med["keylock"]))
    finally:
        for s in setups.values():
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
