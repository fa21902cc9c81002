#!/usr/bin/env python3
"""Measures how long Ctrl-C takes to stop a reply in `wormchat chat --plain`: sends a long
message (a multi-line block, so the prompt prefill takes seconds on a large model), interrupts at
a range of delays (mid-prefill and mid-generation), and prints the time from SIGINT to the
"[cancelled]" mark on the terminal.

  python3 tools/cancel_latency.py --wormchat build/wormchat --model DIR [--words 1500]
"""
import argparse
import os
import pty
import select
import signal
import statistics
import subprocess
import time


_pending = b""  # read from the terminal, not yet matched


def read_until(fd, needle, timeout):
    """Reads until `needle`; returns the time it arrived. What follows it stays for the next call."""
    global _pending
    end = time.monotonic() + timeout
    while needle not in _pending:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {needle!r} within {timeout} s; got {_pending[-300:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            _pending += os.read(fd, 65536)
    arrived = time.monotonic()
    _pending = _pending[_pending.index(needle) + len(needle):]
    return arrived


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wormchat", default="build/wormchat")
    ap.add_argument("--model", required=True)
    ap.add_argument("--words", type=int, default=1500, help="words in the long message")
    ap.add_argument("--delays", default="0.3,0.8,1.5,2.5,4",
                    help="seconds after sending at which to interrupt")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()

    pid, fd = pty.fork()
    if pid == 0:
        os.execv(a.wormchat, [a.wormchat, "chat", "--plain", "--model", a.model, "--seed", "1",
                              "--threads", str(a.threads)])
    read_until(fd, b"> ", 600)
    words = ("the quick brown fox jumps over the lazy dog " * (a.words // 9 + 1)).split()
    lines = [" ".join(words[i:i + 60]) for i in range(0, a.words, 60)]
    latencies = []
    for delay in [float(d) for d in a.delays.split(",")]:
        os.write(fd, b'"""\n' + "\n".join(lines).encode() + b'\n"""\n')
        read_until(fd, b'"""', 10)  # the terminal's echo of the block's end
        time.sleep(delay)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGINT)
        t1 = read_until(fd, b"[cancelled]", 120)
        ms = (t1 - t0) * 1000
        latencies.append(ms)
        print(f"interrupt {delay:4.1f} s after sending: stopped {ms:6.1f} ms after SIGINT",
              flush=True)
        read_until(fd, b"> ", 60)
        os.write(fd, b"/reset\n")
        read_until(fd, b"> ", 60)
    os.write(fd, b"/quit\n")
    os.waitpid(pid, 0)
    print(f"median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")


if __name__ == "__main__":
    main()
