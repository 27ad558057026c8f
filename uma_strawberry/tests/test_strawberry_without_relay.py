"""Item 5 of issue 22: the backend's description apart from Relay.  The C library, the target's
attributes (target.py), the TIR pass (passes.py) and codegen import without `tvm.relay`, so a
second engine can reuse them; only patterns.py (and backend.py's UMA wiring) speak Relay."""
import subprocess
import sys

PROBE = """
import sys
import uma_strawberry.codegen, uma_strawberry.passes, uma_strawberry.target
relay = sorted(name for name in sys.modules if name == "tvm.relay" or name.startswith("tvm.relay."))
print(len(relay), relay[:5])
"""


def test_passes_target_and_codegen_import_without_relay():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0 []"), done.stdout


def test_the_backend_still_registers_from_target():
    """backend.py registers target.py's attributes and ranges (one place for names and defaults)."""
    from uma_strawberry import target
    from uma_strawberry.backend import StrawberryBackend as Backend

    backend = Backend()
    assert backend.target_name == target.NAME
    assert backend.target_attr_ranges == target.ATTR_RANGES
    assert backend._target_attrs == target.ATTRIBUTES
