"""Cost of a password check for a known and an unknown user (the bridge hashes unknown
users against a dummy entry so that timing does not reveal which users exist).

    python -m benchmarks.mqtt_auth_timing [--checks N] [--repeat R]

The password file is written by Debian's ``mosquitto_passwd`` (PBKDF2-SHA512, its
default iterations). Prints per-check microseconds, min/median/max over R repeats.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mqtt_bridge.auth import Credentials


def per_check_us(creds: Credentials, user: str, password: bytes, checks: int) -> float:
    t0 = time.perf_counter()
    for _ in range(checks):
        creds.check(user, password)
    return (time.perf_counter() - t0) / checks * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checks", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "passwd"
        subprocess.run(["mosquitto_passwd", "-c", "-b", str(path), "alice", "secret"], check=True)
        subprocess.run(["mosquitto_passwd", "-b", str(path), "bob", "hunter2"], check=True)
        creds = Credentials.load(path)
    cases = {
        "known user, right password": ("alice", b"secret"),
        "known user, wrong password": ("alice", b"wrong"),
        "unknown user": ("mallory", b"secret"),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (user, pw) in cases.items():  # interleaved: drift hits every case alike
            samples[name].append(per_check_us(creds, user, pw, args.checks))
    print(f"{args.checks} checks x {args.repeat} repeats, microseconds per check (min / median / max)")
    for name, xs in samples.items():
        print(f"  {name:28s} {min(xs):8.1f} {statistics.median(xs):8.1f} {max(xs):8.1f}")


if __name__ == "__main__":
    main()
