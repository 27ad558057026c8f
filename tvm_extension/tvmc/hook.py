"""Start-up hook: patch TVM modules right after they are imported.

Imported from a ``.pth`` file at every interpreter start, so it only installs a finder
(no TVM import here).  Set ``TVM_EXTENSION_DISABLE=1`` to leave TVM untouched.

* ``tvm.driver.tvmc``: the extension options, registry and MLF export (``integration``);
* ``tvm.relay.backend.contrib.uma.backend``: ``UMABackend.register``/``partition`` (``uma.compat``).
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import sys

PATCHES = {
    "tvm.driver.tvmc": ("tvm_extension.tvmc.integration", "install"),
    "tvm.relay.backend.contrib.uma.backend": ("tvm_extension.uma.compat", "install"),
}


def _apply(name, module):
    patcher_module, function = PATCHES[name]
    getattr(importlib.import_module(patcher_module), function)(module)


class _PatchAfterLoad(importlib.abc.Loader):
    def __init__(self, loader, name):
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchAfterLoad(spec.loader, fullname)
        return spec


def activate():
    if os.environ.get("TVM_EXTENSION_DISABLE") == "1":
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name in PATCHES:  # imported before us: patch now
        if name in sys.modules:
            _apply(name, sys.modules[name])


activate()
