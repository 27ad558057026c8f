"""Data folders (C sources, the example backends) shipped inside Python packages.

A backend's C library is a folder of its package (``uma_vanilla/c``).  The framework's C runtime
and the example backends are mapped into its package by the wheel (see pyproject.toml); a source
checkout keeps them in the repository's own folders (``c_runtime/``, ``uma_*/``).  The package is
found, not imported: its data folder is named without running its Python.
"""
import importlib.util
from pathlib import Path
from typing import Optional


def data_folder(package: str, name: str, checkout: Optional[str] = None) -> Path:
    """``<package>/<name>`` (a backend's C library: always there), else ``<checkout>`` relative to
    the checkout's root (the framework's C runtime, mapped into the package only in the wheel)."""
    spec = importlib.util.find_spec(package)  # a top-level package is located, not imported
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"package {package} is not installed (looking for its data folder '{name}')")
    shipped = Path(spec.origin).parent / name
    if shipped.is_dir():
        return shipped
    root = Path(spec.origin).resolve().parent.parents[package.count(".")]
    folder = shipped if checkout is None else root / checkout
    if not folder.is_dir():
        raise FileNotFoundError(f"{package} is installed without its data folder '{name}' ({folder} is missing)")
    return folder
