"""Start-up hook: patch ``tvm.driver.tvmc`` right after it is imported.

Imported from a ``.pth`` file at every interpreter start, so it only installs a finder
(no TVM import here).  Set ``TVM_EXTENSION_DISABLE=1`` to leave tvmc untouched.
"""
import importlib.abc
import importlib.machinery
import os
import sys

TARGET_MODULE = "tvm.driver.tvmc"


class _PatchAfterLoad(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        from tvm_extension.tvmc import integration  # pylint: disable=import-outside-toplevel

        integration.install(module)


class _TVMCFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchAfterLoad(spec.loader)
        return spec


def activate():
    if os.environ.get("TVM_EXTENSION_DISABLE") == "1":
        return
    if not any(isinstance(f, _TVMCFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TVMCFinder())
    if TARGET_MODULE in sys.modules:  # imported before us: patch now
        from tvm_extension.tvmc import integration  # pylint: disable=import-outside-toplevel

        integration.install(sys.modules[TARGET_MODULE])


activate()
