"""The machine a trial ran on, recorded with its results so unlike runs are not compared.

`fingerprint()` runs in the trial process (torch imported there); `differences`,
`mismatches` and `mismatch_line` are pure and compare recorded fingerprints on the
analysis side (compare and the history refuse runs from mismatched machines).
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

# Fields whose difference makes two trials' timings incomparable.
COMPARABLE_KEYS = ("gpu_name", "gpu_count", "driver", "cuda", "cudnn", "torch", "python", "cpu_model", "cpu_count")

# Libraries a workload's speed depends on; those installed are recorded with their versions.
_PACKAGES = ("torch", "webdataset", "numpy", "pandas", "pyarrow", "psutil", "pillow", "ray", "hydra-core",
             "nvidia-ml-py", "nvidia-dali-cuda130", "deepspeed", "triton", "transformers", "datasets",
             "accelerate", "flash-attn")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _usable_cpus() -> Optional[int]:
    """CPUs this process may run on (a container or taskset can give fewer than cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


@lru_cache(maxsize=1)
def git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions(names: Iterable[str] = _PACKAGES) -> Dict[str, str]:
    return dict(_versions(tuple(names)))


@lru_cache(maxsize=4)
def _versions(names: tuple) -> Dict[str, str]:
    """Cached: a zygote reads them once and every trial it forks inherits them (9-16 ms a trial
    otherwise); what is installed does not change under a running zygote."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _driver_from_proc() -> Optional[str]:
    """'NVRM version: ... Kernel Module  570.86.15 ...' -> '570.86.15', without NVML."""
    try:
        words = Path("/proc/driver/nvidia/version").read_text().split()
    except OSError:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "Module" or word == "Module:":
            return words[i + 1]
    return None


def _nvml_driver() -> Optional[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        return driver.decode() if isinstance(driver, bytes) else str(driver)
    except Exception:   # NVML is optional; /proc is the fallback
        return None


def gpu_fields(torch: Any, driver: Any = None) -> Dict[str, Any]:
    """GPU name, UUID, count, per-device names and UUIDs, driver, CUDA, cuDNN and NCCL.
    `torch` is passed in so tests can hand a fake; `driver` is a callable for the driver version."""
    fields: Dict[str, Any] = {"cuda": torch.version.cuda, "cudnn": _safe(torch.backends.cudnn.version),
                              "gpu_count": 0}
    if not torch.cuda.is_available():
        return fields
    props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    uuids = [_gpu_uuid(p) for p in props]
    fields.update(gpu_count=len(props), gpu_name=props[0].name, gpu_uuid=uuids[0],
                  gpu_names=[p.name for p in props], gpu_uuids=uuids,
                  gpu_memory_gb=round(props[0].total_memory / 1e9, 1),
                  gpu_capability=f"{props[0].major}.{props[0].minor}",
                  nccl=_safe(lambda: _version_text(torch.cuda.nccl.version())))
    fields["driver"] = (driver or _nvml_driver)() or _driver_from_proc()
    return fields


def _gpu_uuid(props: Any) -> str:
    """As nvidia-smi writes it: GPU-xxxxxxxx-...; torch gives the bare UUID."""
    uuid = str(getattr(props, "uuid", "") or "")
    return uuid if not uuid or uuid.startswith("GPU-") else f"GPU-{uuid}"


def _version_text(version: Any) -> str:
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _safe(read: Any) -> Any:
    try:
        return read()
    except Exception:
        return None


def _host_memory_gb() -> Optional[float]:
    """Physical memory of the host, GB (1e9 bytes): what pinned memory is weighed against."""
    try:
        import psutil

        return round(psutil.virtual_memory().total / 1e9, 2)
    except Exception:   # psutil missing or /proc unreadable: the pinned-memory warning is skipped
        return None


def fingerprint() -> Dict[str, Any]:
    import torch

    fp: Dict[str, Any] = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": _usable_cpus(),
        "host_mem_gb": _host_memory_gb(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "executable": sys.executable,
    }
    fp.update(gpu_fields(torch))
    return fp


def differences(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, tuple]:
    """Comparable fields that differ between two fingerprints."""
    return {k: (a.get(k), b.get(k)) for k in COMPARABLE_KEYS if a.get(k) != b.get(k)}


def mismatches(records: Sequence[Dict[str, Any]]) -> List[str]:
    """One line per record whose fingerprint differs from the first record's, naming the fields:
    a comparison across these records compares machines as well as settings."""
    with_fp = [r for r in records if r.get("fingerprint")]
    if not with_fp:
        return []
    ref = with_fp[0]
    lines = []
    for record in with_fp[1:]:
        diff = differences(ref["fingerprint"], record["fingerprint"])
        if diff:
            what = ", ".join(f"{k} {a!r} vs {b!r}" for k, (a, b) in diff.items())
            lines.append(f"trial {record.get('trial_id')} ran on a different setup from trial "
                         f"{ref.get('trial_id')}: {what}")
    return lines


def mismatch_line(records: Sequence[Dict[str, Any]]) -> str:
    """"" when the finished trials among `records` ran on one kind of machine; else one line:
    the first that did not, the fields that differ, and how many more. compare and the history
    refuse such runs unless told to mix machines."""
    found = mismatches([r for r in records if r.get("status") == "ok"])
    return "" if not found else found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
