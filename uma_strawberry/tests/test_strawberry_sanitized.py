"""Strawberry's C tests again, against the library built with AddressSanitizer and
UndefinedBehaviorSanitizer (``tvm_extension.testing.clib.run_sanitized``): no report, all pass."""
import re
from pathlib import Path

from tvm_extension.testing import clib

from strawberry_c import REPORTS

HERE = Path(__file__).parent


def short(report: str) -> str:
    """A report with each stack cut to its first frames (the C's; the rest is the interpreter)."""
    return "".join(line for line in report.splitlines(keepends=True)
                   if not (frame := re.match(r"\s+#(\d+) ", line)) or int(frame.group(1)) < 6)


def test_c_tests_pass_under_sanitizers(tmp_path, monkeypatch):
    # The tests capture fd 2 (capfd): the sanitizers write their reports to files, read back here.
    monkeypatch.setenv(REPORTS, str(tmp_path / "report"))
    done = clib.run_sanitized([HERE / "test_strawberry_model.py"])
    done.stdout += "".join(short(report.read_text()) for report in sorted(tmp_path.glob("report.*")))
    clib.assert_clean(done)
