"""QVanilla's C library builds wherever a firmware team builds it: every core from the Cortex-M0+
(the portable C) to the M55 (Helium), at every optimisation level a team uses (-O0 and -Og for
debugging, -Os for size, -O2) and with the flags that take registers from the compiler (a frame
pointer, r9 reserved for an RTOS or position-independent code) or forbid unaligned loads, with
every warning an error.  Whether the builds compute right is the board tests' part
(test_qvanilla_boards.py: -O0, -O2 and a trapping part on the M4 and the M55)."""
import concurrent.futures
import subprocess

import pytest

from tvm_extension.mlf import board as boards

from qvanilla_c import KERNEL_DIR, KIT_DIR, SHIPPED

CORES = {
    "cortex-m0plus": ("-mcpu=cortex-m0plus", "-mfloat-abi=soft"),
    "cortex-m3": ("-mcpu=cortex-m3", "-mfloat-abi=soft"),
    "cortex-m4": ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
    "cortex-m7": ("-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard"),
    "cortex-m33": ("-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
    "cortex-m55": ("-mcpu=cortex-m55", "-mfloat-abi=hard"),
}
LEVELS = ["-O0", "-Og", "-Os", "-O2", "-O2 -fno-omit-frame-pointer"]
# what takes a register or the unaligned loads away, on the cores with the DSP extension's asm
RESTRICTED = ["-O2 -ffixed-r9", "-O2 -msingle-pic-base -fpic", "-O2 -mno-unaligned-access",
              "-O0 -fno-omit-frame-pointer -mno-unaligned-access"]
BUILDS = [(core, flags) for core in CORES for flags in LEVELS] + \
         [(core, flags) for core in ("cortex-m4", "cortex-m33", "cortex-m55") for flags in RESTRICTED]


def compile_all(work, core, flags):
    """arm-none-eabi-gcc -c of every C file an MLF ships; (core, flags, its first error or None)."""
    folder = work / f"{core}{flags.replace(' ', '')}"
    folder.mkdir()
    done = subprocess.run([boards.CC, *CORES[core], "-mthumb", *flags.split(), "-std=c11", "-Wall", "-Wextra",
                           "-Werror", f"-I{KERNEL_DIR}", f"-I{KIT_DIR}", "-c", *map(str, SHIPPED)],
                          cwd=folder, capture_output=True, text=True)
    error = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:300])
    return core, flags, None if done.returncode == 0 else error


def test_the_kernels_build_on_every_core_at_every_level(tmp_path):
    boards.check_tools()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda build: compile_all(tmp_path, *build), BUILDS))
    failed = [f"{core} {flags}: {error}" for core, flags, error in results if error]
    assert not failed, "\n".join(failed)
    assert len(results) == 6 * 5 + 3 * 4
