"""The machine a benchmark ran on, recorded beside its figures (``bench_peer``, ``bench_retrieve``,
``bench_capture``).

The same code's figures have differed by about two between the kinds of machine this project is
measured on (docs/benchmarks.md). Two 2-vCPU machines were an AMD Zen 3 without
VNNI and a Zen 4 with AVX-512 VNNI. A third was an Intel Xeon with AMX. A 20 x 384 x 1,536 int8 product took
247 µs on the first and 47 µs on the third. So a figure without its CPU cannot be compared with another.
Each report names the usable CPUs and the CPU's model, family and model number. It also lists which of
the instruction sets that onnxruntime's int8 kernels choose between the CPU has.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from retrieval.embedding.local_embedder import usable_cpus

# The instruction sets onnxruntime's int8 products are chosen by (x86): AVX2 alone saturates
# uint8 x int8 pairs (a Zen 3 lost exactness there); VNNI and AMX do not.
INT8_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def describe(cpuinfo: str | None = None) -> dict[str, Any]:
    """This machine (``cpuinfo``: the text of ``/proc/cpuinfo``, read when None; fields it lacks, as
    on a CPU of another architecture, are None)."""
    fields = _first_processor(_read_cpuinfo() if cpuinfo is None else cpuinfo)
    flags = set(fields.get("flags", "").split())
    return {
        "cpus": usable_cpus(),
        "cpu": fields.get("model name"),
        "vendor": fields.get("vendor_id"),
        "family": _number(fields.get("cpu family")),
        "model": _number(fields.get("model")),
        "int8_flags": [flag for flag in INT8_FLAGS if flag in flags],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def summary(machine: dict[str, Any]) -> str:
    """One line for a report's head: "2 CPUs, <model name> (family 6 model 143; avx2 ... amx_int8)"."""
    name = machine.get("cpu") or "an unknown CPU"
    detail = []
    if machine.get("family") is not None and machine.get("model") is not None:
        detail.append(f"family {machine['family']} model {machine['model']}")
    detail.append(" ".join(machine.get("int8_flags") or []) or "no x86 int8 extensions")
    return f"{machine.get('cpus')} CPUs, {name} ({'; '.join(detail)})"


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def _first_processor(text: str) -> dict[str, str]:
    """The ``key : value`` fields of the first block (every vCPU of a machine here is alike)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, separator, value = line.partition(":")
        if separator:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _number(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
