"""What the benchmark scripts share: where the keylock binary is, and a
free port on loopback. The scripts run as `python3 benches/NAME.py`, so
this directory is on their import path."""
import os, socket

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
KEYLOCK = os.path.join(TARGET_DIR, "release", "keylock")


def free_port():
    """A TCP port free on 127.0.0.1 when this returns."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
