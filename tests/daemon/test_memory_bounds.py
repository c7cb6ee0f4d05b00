"""The daemon's process set-up bounds the memory it does not manage itself.

glibc's arenas and libgit2's object cache are process-wide: each check runs the daemon's
own set-up (`process.tune_process`) in a fresh interpreter, then does what the daemon's
threads do, and reads what glibc and libgit2 report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from thrum.daemon.limits import MALLOC_ARENAS
from thrum.sync.gitstore.gitlib import OBJECT_CACHE_BYTES

THREADS = 6

# Threads alive at once, each allocating through malloc (a bytearray over pymalloc's 512
# bytes), then glibc's own account of its arenas (malloc_info: one <heap> per arena).
PROBE = """
import ctypes, ctypes.util, json, os, sys, tempfile, threading
tuned = None
if sys.argv[1] == "tuned":
    from thrum.daemon.process import tune_process
    tune_process()
    from thrum.daemon import limits
    tuned = limits._libc is not None
import pygit2
libc = ctypes.CDLL(ctypes.util.find_library("c"))
if not hasattr(libc, "malloc_info"):
    print(json.dumps({"glibc": False})); sys.exit(0)
n = int(sys.argv[2])
barrier = threading.Barrier(n + 1)
held = []
def work():
    held.append(bytearray(64 * 1024))
    barrier.wait()
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(n)]
for t in threads:
    t.start()
barrier.wait()
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.TemporaryFile() as f:
    fp = libc.fdopen(os.dup(f.fileno()), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    f.seek(0)
    heaps = f.read().decode().count("<heap nr=")
barrier.wait()
for t in threads:
    t.join()
print(json.dumps({"glibc": True, "tuned": tuned, "arenas": heaps, "git_cache_max": pygit2.settings.cached_memory[1]}))
"""


def _probe(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(THREADS)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_daemons_threads_share_a_few_malloc_arenas_and_libgit2s_cache_is_capped():
    untuned = _probe("plain")
    if not untuned["glibc"]:
        pytest.skip("not glibc: no arenas to bound")
    # the premise: left alone, glibc gives each of these threads an arena of its own
    assert untuned["arenas"] > MALLOC_ARENAS
    tuned = _probe("tuned")
    assert tuned["tuned"]
    assert tuned["arenas"] <= MALLOC_ARENAS
    assert tuned["git_cache_max"] == OBJECT_CACHE_BYTES


def test_a_users_own_arena_setting_wins():
    if not _probe("plain")["glibc"]:
        pytest.skip("not glibc")
    mine = _probe("tuned", MALLOC_ARENA_MAX=str(MALLOC_ARENAS + 2))
    assert MALLOC_ARENAS < mine["arenas"] <= MALLOC_ARENAS + 2
