"""Heavy modules imported where they are first used, not where they are named.

SciPy's ``stats`` takes most of a second to import; modules that only sometimes reach it (a
probe's metrics, a test in the analysis) name it at the top as ``sps = lazy("scipy.stats")``
and the import happens at the first attribute looked up, so the command line and a sweep that
never computes a statistic start without it. A job package's front (its ``__init__``) names
its public objects the same way (`front`), so that importing the package's light ``settings``
module, as a command's ``--help`` does, runs none of the job's code.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from biasscope.core.renamed import warn_renamed


class LazyModule:
    """Stands for the module ``name`` until an attribute of it is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy(name: str) -> Any:
    """The module ``name``, imported when first used (typed ``Any``, as the module is)."""
    return LazyModule(name)


def front(package: str, homes: Mapping[str, str], renamed: Mapping[str, str] | None = None
          ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each public name from
    its module (``homes``: name -> module) when it is first named, then keep it in the package,
    so ``from package import name`` works as if the front imported everything; ``renamed``:
    old names still given for one release, with a warning (`biasscope.core.renamed`); any
    other name of a submodule imports it (``package.job``). The front assigns them under ``if
    not TYPE_CHECKING`` and imports the names for mypy under ``if TYPE_CHECKING``."""
    old = dict(renamed or {})

    def attribute(name: str) -> Any:
        if name in old:
            warn_renamed(name, old[name])
            return attribute(old[name])
        home = homes.get(name)
        if home is None:
            # A submodule (`package.job`), as when the front imported everything.
            if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # imported once
        return value

    def listing() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return attribute, listing


def installed_version(name: str) -> str | None:
    """The installed version of the distribution ``name`` (None if it is not installed),
    without importing it or `importlib.metadata` (whose import alone costs a report tens of
    milliseconds): a module already imported gives its ``__version__``, else the ``Version:``
    line of the ``.dist-info`` beside the package; anything else asks `importlib.metadata`."""
    module = sys.modules.get(name)
    if isinstance(version := getattr(module, "__version__", None), str):
        return str(version)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = {info for folder in folders
             for info in Path(folder).parent.glob(f"{name}-*.dist-info")}
    if len(found) == 1:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for line in (found.pop() / "METADATA").read_text(encoding="utf-8").splitlines():
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
                if not line:
                    break
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
