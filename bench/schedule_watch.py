"""The inotify watch of bench/schedule_lateness.py: a separate process time-stamps every file
renamed or created in a queue's folder (the mover's own lateness, whatever the consumers do),
and read_watch turns its output into {message id: first time seen}.
"""

import ctypes
import os
import select
import struct
import time

from mq import store as fmt

IN_MOVED_TO, IN_CREATE, IN_Q_OVERFLOW = 0x80, 0x100, 0x4000


def watch_folder(path, out_path, stop_event, ready_event):
    """Append "unix_time name" for every file renamed or created in path, until stop_event."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), IN_MOVED_TO | IN_CREATE) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    overflow = 0
    with open(out_path, "w") as out:
        ready_event.set()
        while not stop_event.is_set():
            r, _, _ = select.select([fd], [], [], 0.2)
            if not r:
                continue
            try:
                buf = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            now = time.time()  # after the read: an upper bound for every event in buf
            pos = 0
            while pos < len(buf):
                _, mask, _, length = struct.unpack_from("iIII", buf, pos)
                name = buf[pos + 16:pos + 16 + length].rstrip(b"\0").decode()
                pos += 16 + length
                if mask & IN_Q_OVERFLOW:
                    overflow += 1
                elif name:
                    out.write(f"{now:.6f} {name}\n")
        if overflow:
            out.write(f"overflow {overflow}\n")
    os.close(fd)


def read_watch(out_path):
    """({message id: first time its entry was seen}, how many times inotify overflowed)."""
    seen, overflow = {}, 0
    with open(out_path) as f:
        for line in f:
            a, b = line.split()
            if a == "overflow":
                overflow = int(b)
                continue
            message_id = fmt.parse_entry(b)
            if message_id and message_id[0] not in seen:
                seen[message_id[0]] = float(a)
    return seen, overflow

