#!/usr/bin/env python3
"""What creating a file costs in a folder: wall time and CPU per create, and per rename.

    python3 bench/create_cost.py [--files 2000] FOLDER [FOLDER ...]

For each folder given (the folder of an mq root, a fresh folder elsewhere on the same file
system), it creates --files empty files in a new sub-folder, renames each once, and prints
microseconds per create and per rename, wall and CPU (user + system). The files are left in
place (deleting them would make later creates nearby slower on ext4 without a journal, which
skips inodes freed in the last 12 hours one by one, docs/FORMAT.md "Spare files"); remove the
sub-folders when done. Run it under `perf record -g` to see where a create's time goes.
"""

import argparse
import os
import sys
import tempfile
import time


def cost(folder: str, files: int) -> dict:
    """Microseconds per create and per rename in a new sub-folder of folder."""
    work = tempfile.mkdtemp(prefix="create-cost-", dir=folder)
    result = {"folder": work}
    for step in ("create", "rename"):
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(files):
            path = os.path.join(work, f"f{i}")
            if step == "create":
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            else:
                os.rename(path, path + ".r")
        result[step] = ((time.perf_counter() - wall) / files * 1e6,
                        (time.process_time() - cpu) / files * 1e6)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="folders to measure in")
    parser.add_argument("--files", type=int, default=2000, help="files per folder (default 2000)")
    args = parser.parse_args(argv)
    for folder in args.folders:
        found = cost(folder, args.files)
        print(f"{found['folder']}: create {found['create'][0]:.1f} us ({found['create'][1]:.1f} us "
              f"CPU), rename {found['rename'][0]:.1f} us ({found['rename'][1]:.1f} us CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
