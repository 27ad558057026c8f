"""Strawberry's C tests again, against the library built with AddressSanitizer and
UndefinedBehaviorSanitizer (``tvm_extension.testing.clib.run_sanitized``): no report, all pass."""
from pathlib import Path

from tvm_extension.testing import clib

HERE = Path(__file__).parent


def test_c_tests_pass_under_sanitizers():
    clib.assert_clean(clib.run_sanitized([HERE / "test_strawberry_model.py"]))
