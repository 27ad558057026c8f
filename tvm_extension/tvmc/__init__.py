"""TVMC integration: makes TVM's own ``tvmc`` load extensions and compile for their targets.

``startup.pth`` (installed into site-packages) imports ``hook`` at interpreter start-up;
``hook`` waits for ``tvm.driver.tvmc`` to be imported and then ``integration.install``
patches it.  Nothing here is imported by backends.
"""
from .python_flow import compile_model

__all__ = ["compile_model"]
