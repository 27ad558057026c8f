"""The base class every extension derives from."""


class ExtensionError(Exception):
    """A problem the user can fix (bad path, broken extension, name clash...).

    Front ends print ``str(error)`` as one line and exit non-zero.
    """


class TVMExtension:
    """Base class of a TVM extension.

    Subclass it in ``tvm_extension/<your_name>/__init__.py`` and return your
    UMA backend instances from ``uma_backends``::

        class VanillaExtension(TVMExtension):
            def uma_backends(self):
                return [VanillaAcceleratorBackend()]
    """

    def uma_backends(self):
        """UMA backends (``UMABackend`` instances) this extension provides."""
        return []
