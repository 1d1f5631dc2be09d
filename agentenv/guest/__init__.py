"""Code that runs inside a sandbox, or as root beside it: the executor (``executor.py``), the
host-side work inside a container's mount namespace (``nsop.py``) and the check that a
recycled sandbox is clean (``wipe.py``).

Everything here is stdlib only and stays Python >= 3.6 compatible: it runs in images we do
not control (or in a root process that must import nothing it did not bring). The host does
not import these modules to run them; it reads them (:func:`path`, :func:`source`) and ships
the text or its bytecode. The one host import is :class:`executor.HeadTail`.
"""

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):  # type: (str) -> str
    """The file of the guest program ``name`` (``"executor"``, ``"nsop"``, ``"wipe"``)."""
    return os.path.join(_HERE, name + ".py")


def source(name):  # type: (str) -> bytes
    """The source of the guest program ``name``, as it is shipped into a sandbox."""
    with open(path(name), "rb") as f:
        return f.read()
