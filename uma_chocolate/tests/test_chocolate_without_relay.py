"""Item 5 of issue 22: the backend's description apart from Relay.  The C library, the target's
attributes (target.py), the TIR pass (passes.py) and codegen import without `tvm.relay`, so a
second engine can reuse them; only patterns.py (and backend.py's UMA wiring) speak Relay."""
import pytest

pytest.importorskip("tvm.relay", reason="checks the Relay engine's modules import without tvm.relay (hhb-tvm); apache-tvm has no tvm.relay to avoid")

from tvm_extension.testing import assert_registers_target, assert_relay_free  # noqa: E402


def test_passes_target_and_codegen_import_without_relay():
    assert_relay_free("uma_chocolate")


def test_the_backend_registers_target_py():
    from uma_chocolate import ChocolateBackend, target

    assert_registers_target(ChocolateBackend(), target)
