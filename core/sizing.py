"""What `auto` means for --workers and --fronts: sizes from the cores a process may use."""

import os

AUTO = "auto"


def count(value) -> int | str:
    """A whole number, or "auto" (sized from the cores this process may run on)."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. under taskset or a cgroup
    cpuset), which is what the processes mq starts may use too."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_workers(cores: int) -> int:
    """--workers auto: one pair a core, at least 2 and at most 256 (the limit of --workers)."""
    # More pairs than cores bought no throughput on 2 cores and cost 55 MB of PSS (445 MB of
    # RSS) more for 8 pairs than for 2 (bench/RESULTS.md, "Processes by --workers"); two keep
    # a second save actor taking adds while one restarts.
    return min(256, max(2, cores))


def auto_fronts(cores: int) -> int:
    """--fronts auto: one front per 4 cores, the rest left to the actors (bench/RESULTS.md,
    "Several fronts": 4 fronts did best on 16 cores, 8 fronts took cores the actors needed)."""
    return min(64, max(1, cores // 4))  # 64: the limit of --fronts
