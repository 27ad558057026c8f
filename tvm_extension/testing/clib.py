"""The one way tests call a backend's C library: built with gcc into a shared object and called
through ``ctypes`` with the API's own structs, numpy arrays as the tensors.

Every C test runs twice.  As shipped (``-O2``) in the test process; and under AddressSanitizer and
UndefinedBehaviorSanitizer: ``run_sanitized`` starts the same test files in a child pytest with
``TVM_EXTENSION_SANITIZED=1`` (``build`` then adds the sanitizers), ASan's runtime preloaded and
Python allocating with plain ``malloc`` (so every array, numpy's and ctypes' alike, has ASan's red
zones one element past its end).  A sanitizer report ends the child at once: the test that runs
it fails with the report.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

SANITIZED = "TVM_EXTENSION_SANITIZED"
REPORTS = "TVM_EXTENSION_SANITIZER_REPORTS"  # where the child's sanitizers write (run_sanitized)
SANITIZE_FLAGS = ["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


class CBuildError(RuntimeError):
    """gcc refused the library (the first error line)."""


def sanitized() -> bool:
    """True in the child pytest of ``run_sanitized``: libraries are built with the sanitizers."""
    return os.environ.get(SANITIZED) == "1"


def build(sources: Iterable[Path], include_dirs: Iterable[Path], work: Path, name: str = "lib",
          flags: Sequence[str] = ("-O2",), std: str = "-std=c11") -> ctypes.CDLL:
    """``sources`` as one shared object in ``work``, loaded.  ``flags`` as shipped, replaced by
    the sanitizer flags under ``run_sanitized`` (then the ``-D`` and ``-m`` ones of ``flags`` stay)."""
    requested = list(flags)
    if sanitized() and os.environ.get(REPORTS):
        _reports_to_files(os.environ[REPORTS])
    if sanitized():
        flags = [*SANITIZE_FLAGS, *(f for f in flags if f.startswith(("-D", "-m")))]
    library = Path(work) / f"{name}{'_sanitized' if sanitized() else ''}.so"
    command = ["gcc", std, *WARNINGS, *flags, "-shared", "-fPIC", *(f"-I{d}" for d in include_dirs),
               "-o", str(library), *map(str, sources), "-lm"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        first = next((l for l in done.stderr.splitlines() if "error" in l), done.stderr.strip()[:500])
        raise CBuildError(f"gcc failed to build {library.name}: {first}")
    lib = ctypes.CDLL(str(library))
    lib.build_flags = requested  # what the test asked for (the sanitized build keeps its -D and -m)
    return lib


def _reports_to_files(path: str) -> None:
    """Each sanitizer runtime writes its reports to ``path``.<pid>: ASan and GCC's UBSan (a
    library of its own, which does not read ``log_path`` from its options here) each told so."""
    for runtime in ("libasan.so", "libubsan.so"):
        found = subprocess.run(["gcc", f"-print-file-name={runtime}"], capture_output=True, text=True, check=True)
        ctypes.CDLL(found.stdout.strip()).__sanitizer_set_report_path(path.encode())


def prototypes(lib: ctypes.CDLL, restype, *names: str) -> None:
    """Each of ``names`` returns ``restype`` (ctypes assumes int otherwise)."""
    for name in names:
        getattr(lib, name).restype = restype


def pointer(array: Optional[np.ndarray], ctype=ctypes.c_float):
    """``array``'s data as a ``ctype*`` (NULL for None); the array must outlive the call."""
    return None if array is None else array.ctypes.data_as(ctypes.POINTER(ctype))


def run_sanitized(test_files: Sequence[Path], *pytest_args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """``test_files`` in a child pytest against the sanitized builds: (returncode, output).

    The sanitizers write their reports to files (a test reading fd 2 with ``capfd`` would
    otherwise swallow them, and lose them with the process a report ends), appended to the
    returned stderr with each stack cut to its first frames (the C's; the rest is Python's)."""
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True).stdout.strip()
    cwd = Path(test_files[0]).resolve().parent.parent  # the backend folder: its pytest configuration
    with tempfile.TemporaryDirectory(prefix="sanitizer-reports-") as reports:
        env = {**os.environ, SANITIZED: "1", REPORTS: f"{reports}/report", "LD_PRELOAD": asan, "PYTHONMALLOC": "malloc",
               # Python keeps objects alive at exit by design: leaks are not the C's, so not reported
               "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(Path(f).resolve()) for f in test_files),
                               *pytest_args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        done.stderr += "".join(_short(report.read_text(errors="replace")) for report in sorted(Path(reports).iterdir()))
    return done


def _short(report: str, frames: int = 6) -> str:
    return "".join(line for line in report.splitlines(keepends=True)
                   if not (frame := re.match(r"\s+#(\d+) ", line)) or int(frame.group(1)) < frames)


def assert_clean(done: subprocess.CompletedProcess) -> None:
    """The sanitized run passed and no sanitizer said anything."""
    output = done.stdout + done.stderr
    report = next((l for l in output.splitlines() if "Sanitizer" in l or "runtime error:" in l), None)
    assert report is None, output[-6000:]
    assert done.returncode == 0, output[-6000:]
