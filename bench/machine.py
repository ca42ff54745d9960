"""Describe the machine a benchmark ran on: CPU, memory, kernel, Python, the temp dir's file system."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

from common import MIB, REPO

PACKAGES = ("markdown-it-py", "psutil", "py-spy", "prysk", "byexample", "matplotlib")


def _first_line_with(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line[len(prefix) :].strip()
    except OSError:
        return None
    return None


def cpu_model() -> str:
    return _first_line_with("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()


def memory_total() -> str:
    text = _first_line_with("/proc/meminfo", "MemTotal")
    if text is None:
        return "unknown"
    kib = int(text.split()[0])
    return f"{kib * 1024 / (1024 * MIB):.1f} GiB"


def os_name() -> str:
    pretty = _first_line_with("/etc/os-release", "PRETTY_NAME=")
    return pretty.strip('"') if pretty else platform.system()


def mount_of(path: str) -> str:
    """`fstype on mountpoint (device, options)` of the file system holding `path`, from /proc/mounts."""
    real = os.path.realpath(path)
    best: tuple[str, str, str, str] | None = None
    try:
        with open("/proc/mounts", encoding="utf-8") as handle:
            for line in handle:
                device, mountpoint, fstype, options = line.split()[:4]
                inside = real == mountpoint or real.startswith(mountpoint.rstrip("/") + "/")
                if inside and (best is None or len(mountpoint) >= len(best[1])):
                    best = (device, mountpoint, fstype, options)
    except OSError:
        return "unknown"
    if best is None:
        return "unknown"
    device, mountpoint, fstype, options = best
    return f"{fstype} on {mountpoint} ({device}, {options})"


def file_creation_ms(directory: str, count: int = 200) -> float:
    """Median time to create one empty file in `directory` (what each block's output file costs)."""
    with tempfile.TemporaryDirectory(prefix="gg-create-", dir=directory) as tmp:
        times = []
        for index in range(count):
            started = time.perf_counter()
            fd = os.open(os.path.join(tmp, f"f{index}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.close(fd)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" with uncommitted changes" if dirty else "")


def package_versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def load_now() -> str:
    """Load average and, where the kernel reports it, the share of the last minute that tasks waited for CPU or I/O."""
    text = "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())
    waits = []
    for resource in ("cpu", "io"):
        line = _first_line_with(f"/proc/pressure/{resource}", "some")  # "some avg10=... avg60=..."
        if line is None:
            continue
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "avg60" in fields:
            waits.append(f"{resource} {fields['avg60']}%")
    return text + (f"; waiting in the last minute (PSI): {', '.join(waits)}" if waits else "")


def describe() -> list[tuple[str, str]]:
    """(what, value) pairs describing this machine now."""
    temp = tempfile.gettempdir()
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    rows = [
        ("date", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("CPU", f"{cpu_model()}, {cores} cores ({usable} usable)"),
        ("memory", memory_total()),
        ("kernel", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("OS", os_name()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("temp dir", f"{temp}: {mount_of(temp)}"),
        ("creating an empty file there", f"{file_creation_ms(temp):.3f} ms (median of 200)"),
    ]
    if os.path.isdir("/dev/shm") and os.path.realpath(temp) != "/dev/shm":
        rows.append(("creating one in /dev/shm", f"{file_creation_ms('/dev/shm'):.3f} ms ({mount_of('/dev/shm')})"))
    rows += [
        ("PYTHONDONTWRITEBYTECODE", os.environ.get("PYTHONDONTWRITEBYTECODE") or "unset"),
        ("packages", package_versions()),
        ("guide-guard", f"commit {git_revision()}"),
        ("load at start", load_now()),
    ]
    return rows


if __name__ == "__main__":
    for what, value in describe():
        print(f"{what:>38}: {value}")
    sys.exit(0)
