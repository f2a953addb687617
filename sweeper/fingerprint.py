"""The machine a trial ran on, recorded with its results so unlike runs are not compared."""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, Iterable

# Fields whose difference makes two trials' timings incomparable.
COMPARABLE_KEYS = ("gpu_name", "gpu_count", "driver", "cuda", "cudnn", "torch", "python", "cpu_model", "cpu_count")

_PACKAGES = ("torch", "webdataset", "numpy", "ray", "hydra-core", "nvidia-dali-cuda130", "deepspeed")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@lru_cache(maxsize=1)
def git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions(names: Iterable[str] = _PACKAGES) -> Dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _gpu_fields() -> Dict[str, Any]:
    import torch

    fields: Dict[str, Any] = {"cuda": torch.version.cuda, "gpu_count": 0}
    if not torch.cuda.is_available():
        return fields
    props = torch.cuda.get_device_properties(0)
    fields.update(gpu_count=torch.cuda.device_count(), gpu_name=props.name,
                  gpu_uuid=str(getattr(props, "uuid", "")), cudnn=torch.backends.cudnn.version())
    try:
        import pynvml

        pynvml.nvmlInit()
        fields["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception:   # NVML is optional; the rest of the fingerprint still stands
        pass
    return fields


def fingerprint() -> Dict[str, Any]:
    import torch

    fp: Dict[str, Any] = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "executable": sys.executable,
    }
    fp.update(_gpu_fields())
    return fp


def differences(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, tuple]:
    """Comparable fields that differ between two fingerprints."""
    return {k: (a.get(k), b.get(k)) for k in COMPARABLE_KEYS if a.get(k) != b.get(k)}
