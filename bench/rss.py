"""Peak resident set of this process, for the benchmarks that measure memory in child processes."""

from __future__ import annotations

import resource


def peak_mb() -> float:
    """This process's peak resident set (MB): ``VmHWM``, which starts afresh at ``exec`` (a child's
    ``ru_maxrss`` starts at its parent's peak when it was forked), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
