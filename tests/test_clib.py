"""tvm_extension.testing.clib, the one way tests call C: a sanitizer report in the C fails the
sanitized run (with the report), a clean library passes it, and gcc's refusal is one line."""
import textwrap

import pytest

from tvm_extension.testing import clib

LIBRARY = "float read_at(const float* p, int i) { return p[i]; }\n"

TESTS = textwrap.dedent('''
    import ctypes
    from pathlib import Path

    import numpy as np

    from tvm_extension.testing import clib

    def test_reads(tmp_path):
        lib = clib.build([Path(__file__).with_name("lib.c")], [], tmp_path)
        clib.prototypes(lib, ctypes.c_float, "read_at")
        array = np.arange(300, dtype=np.float32)
        assert lib.read_at(clib.pointer(array), INDEX) >= 0
''')


@pytest.mark.parametrize("index, clean", [(299, True), (300, False)], ids=["inside", "one past the end"])
def test_sanitized_run_reports_a_read_past_an_array(tmp_path, index, clean):
    folder = tmp_path / "backend" / "tests"
    folder.mkdir(parents=True)
    (folder / "lib.c").write_text(LIBRARY)
    (folder / "test_lib.py").write_text(TESTS.replace("INDEX", str(index)))
    done = clib.run_sanitized([folder / "test_lib.py"])
    if clean:
        clib.assert_clean(done)
    else:
        assert done.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in done.stdout + done.stderr
        with pytest.raises(AssertionError):
            clib.assert_clean(done)


def test_a_library_gcc_refuses_is_one_line(tmp_path):
    (tmp_path / "bad.c").write_text("int f(void) { return missing; }\n")
    with pytest.raises(clib.CBuildError, match=r"gcc failed to build lib.so: .*missing"):
        clib.build([tmp_path / "bad.c"], [], tmp_path)
