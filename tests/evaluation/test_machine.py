"""What the benches record of the machine they ran on (evaluation/machine.py)."""

from __future__ import annotations

from evaluation import machine

# /proc/cpuinfo as two machine kinds of this project's sessions showed it (abridged: two vCPUs each).
INTEL_AMX = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_vnni avx_vnni amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_vnni avx_vnni amx_bf16 amx_tile amx_int8
"""
AMD_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma bmi2

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma bmi2
"""
# An Arm machine's: no model name, family or flags line.
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


def test_an_intel_machine_with_amx_is_named_with_every_int8_extension_it_has():
    described = machine.describe(INTEL_AMX)
    assert described["cpu"] == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert (described["vendor"], described["family"], described["model"]) == ("GenuineIntel", 6, 143)
    assert described["int8_flags"] == ["avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"]
    line = machine.summary(described)
    assert "Platinum 8481C" in line and "family 6 model 143; avx2 avx512f avx512_vnni avx_vnni amx_int8" in line


def test_an_avx2_machine_says_it_has_no_vnni():
    described = machine.describe(AMD_AVX2)
    assert (described["cpu"], described["family"], described["model"]) == ("AMD EPYC 7B13", 25, 1)
    assert described["int8_flags"] == ["avx2"]
    assert machine.summary(described).endswith("AMD EPYC 7B13 (family 25 model 1; avx2)")


def test_a_cpu_without_those_fields_is_described_without_guessing():
    described = machine.describe(ARM)
    assert described["cpu"] is None and described["family"] is None and described["model"] is None
    assert described["int8_flags"] == []
    assert machine.summary(described).endswith("an unknown CPU (no x86 int8 extensions)")
    assert machine.describe("")["cpu"] is None  # no /proc/cpuinfo at all


def test_this_machine_is_described_with_its_usable_cpus():
    described = machine.describe()
    assert described["cpus"] >= 1 and described["python"].startswith("3.")
    assert machine.summary(described).startswith(f"{described['cpus']} CPUs, ")
