"""Notebook cells that attack the sandbox itself, shared by the sandbox's tests and the graded class.

Each cell prints ``<attack>: <verdict>`` lines, and a line with ``HOLE`` when the attack
worked (the word is split in the code, so that a page showing the code does not hold it): a user namespace of its own and a tmpfs mounted in it, kernel keys, writing outside
the two bounded tmpfs folders or past their sizes, how many processes it may start, and what a sandbox leaves for the next
(files, a System V shared memory segment, processes in a session of their own).
:func:`left_behind` finds, on this machine, the processes of the sandbox that ran the
"left behind" cell: only its own, whoever else runs on the machine under the same user.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ATTACKS = {
    "user namespace": (
        "import ctypes, subprocess\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('user namespace:', 'HO' 'LE' if libc.unshare(0x10000000) == 0 else 'refused', ctypes.get_errno())\n"
        "tried = subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c',\n"
        "    'mount -t tmpfs -o size=1g big /job && dd if=/dev/zero of=/job/x bs=1M count=100 && echo MOUNTED'],\n"
        "    capture_output=True, text=True)\n"
        "print('user namespace:', 'HO' 'LE tmpfs' if 'MOUNTED' in tried.stdout else 'no tmpfs', tried.stderr.strip())"),
    "kernel keys": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "key = libc.syscall(248, b'user', b'qkv-left-behind', b'secret', 6, ctypes.c_int(-4))  # add_key, user keyring\n"
        "print('kernel keys:', 'HO' 'LE' if key > 0 else 'refused', ctypes.get_errno())\n"
        "joined = libc.syscall(250, 1, b'qkv-session')  # keyctl(KEYCTL_JOIN_SESSION_KEYRING)\n"
        "print('kernel keys:', 'HO' 'LE session' if joined > 0 else 'refused')"),
    "writable places": (
        "import os\nfor folder in ['/', '/dev', '/sandbox', '/sandbox/lib', '/sandbox/site', '/usr', '/proc/sys',\n"
        "               os.path.dirname(os.__file__)]:\n"
        "    try:\n        open(os.path.join(folder, 'planted'), 'w').write('x')\n"
        "        print('writable places: HO' 'LE', folder)\n"
        "    except OSError as err:\n        print('writable places: refused', folder, type(err).__name__)\n"
        "for folder in ['/job', '/dev/shm']:\n"
        "    s = os.statvfs(folder)\n    print('writable places: size', folder, s.f_blocks * s.f_frsize)\n"
        "    try:\n        with open(os.path.join(folder, 'fill'), 'wb') as f:\n"
        "            for _ in range(200):\n                f.write(b'x' * (1 << 20))\n"
        "        print('writable places: HO' 'LE filled', folder)\n"
        "    except OSError as err:\n        print('writable places: full', folder, type(err).__name__)\n"
        "    os.remove(os.path.join(folder, 'fill'))"),
    "processes": (
        "import os, time\nforked = 0\nwhile forked < 100:\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    forked += 1\n"
        "for _ in range(forked):\n    os.wait()\nprint('processes: forked', forked)"),
    "left behind": (
        "import os, subprocess, ctypes\nopen('/job/left-behind', 'w').write('x')\nopen('/dev/shm/left-behind', 'w')\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('left behind: shm segment', libc.shmget(0x51c7, 4096, 0o1666))  # IPC_CREAT | 0666\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    os.execv('/usr/bin/sleep', ['sleep', '301'])\n"
        "print('left behind: uid', os.getuid())\nprint('left behind: pid namespace', os.readlink('/proc/self/ns/pid'))"),
    "what is left": (
        "import os, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "for path in ['/job/left-behind', '/dev/shm/left-behind']:\n"
        "    print('what is left:', 'HO' 'LE' if os.path.exists(path) else 'nothing at', path)\n"
        "print('what is left:', 'HO' 'LE shm' if libc.shmget(0x51c7, 0, 0) >= 0 else 'no shm segment')\n"
        "print('what is left: processes', sorted(p for p in os.listdir('/proc') if p.isdigit()))"),
}


def job(*names: str) -> dict:
    return {"problem_set": "ps0", "givens": {}, "display_methods": [],
            "cells": [{"id": i, "run": ATTACKS[name]} for i, name in enumerate(names)]}


def printed(data: bytes) -> list[str]:
    """The lines the cells printed, from the run record's bytes (:mod:`qkv_grading.run_record`)."""
    from qkv_grading import run_record

    record = run_record.decode(data)
    text = "".join(o.text for c in record.cells for o in c.outputs if o.kind in ("stdout", "stderr", "error"))
    return text.splitlines()


def status(data: bytes) -> str:
    from qkv_grading import run_record

    return run_record.decode(data).status


def holes(lines: list[str]) -> list[str]:
    return [line for line in lines if "HOLE" in line]


def left_behind(printed_text: str) -> list[int]:
    """The live processes on this machine of the sandbox whose "left behind" cell printed ``printed_text``
    (its lines, or a feedback page that shows them): those under its uid in its process namespace.
    (The kernel may give a namespace's number to a new one once it has ended: with the uid as well,
    what is found is this sandbox's.)"""
    uid = int(re.search(r"left behind: uid (\d+)", printed_text)[1])
    namespace = re.search(r"left behind: pid namespace (pid:\[\d+\])", printed_text)[1]
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry.stat().st_uid == uid and os.readlink(entry / "ns" / "pid") == namespace
                        and (entry / "stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")):
                    found.append(int(entry.name))
            except (OSError, IndexError):
                pass  # ended meanwhile
    return found
