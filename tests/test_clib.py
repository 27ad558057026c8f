"""tvm_extension.testing.clib, the one way tests call C: a sanitizer report in the C (a read past
an array, a signed overflow) fails the sanitized run with the report, even from a test that
captures fd 2; a clean library passes it; gcc's refusal is one line."""
import textwrap

import pytest

from tvm_extension.testing import clib

pytestmark = pytest.mark.quick  # scripts/test.sh --quick runs this module whole

LIBRARY = """#include <limits.h>
float read_at(const float* p, int i) { return p[i]; }
int add(int a, int b) { return a + b; }
"""

TESTS = textwrap.dedent('''
    import ctypes
    from pathlib import Path

    import numpy as np

    from tvm_extension.testing import clib

    def test_reads(tmp_path, capfd):  # capfd holds fd 2: the report must still come out
        lib = clib.build([Path(__file__).with_name("lib.c")], [], tmp_path)
        clib.prototypes(lib, ctypes.c_float, "read_at")
        array = np.arange(300, dtype=np.float32)
        assert lib.read_at(clib.pointer(array), INDEX) >= 0
        assert lib.add(2**31 - 1, ADDEND) != 0
''')


@pytest.mark.parametrize("index, addend, report", [
    (299, 0, None), (300, 0, "AddressSanitizer: heap-buffer-overflow"),
    (299, 1, "runtime error: signed integer overflow")], ids=["clean", "one past the end", "int overflow"])
def test_sanitized_run_reports_undefined_behaviour(tmp_path, index, addend, report):
    folder = tmp_path / "backend" / "tests"
    folder.mkdir(parents=True)
    (folder / "lib.c").write_text(LIBRARY)
    (folder / "test_lib.py").write_text(TESTS.replace("INDEX", str(index)).replace("ADDEND", str(addend)))
    done = clib.run_sanitized([folder / "test_lib.py"])
    if report is None:
        clib.assert_clean(done)
    else:
        assert done.returncode != 0 and report in done.stderr, done.stdout + done.stderr
        assert "lib.c" in done.stderr  # where, in the C
        with pytest.raises(AssertionError):
            clib.assert_clean(done)


def test_a_library_gcc_refuses_is_one_line(tmp_path):
    (tmp_path / "bad.c").write_text("int f(void) { return missing; }\n")
    with pytest.raises(clib.CBuildError, match=r"gcc failed to build lib.so: .*missing"):
        clib.build([tmp_path / "bad.c"], [], tmp_path)
