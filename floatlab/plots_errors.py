"""The old home of ``error_profile``'s picture, kept importable: the code now lives in
:mod:`floatlab.plots.errors` (with the other pictures of error) and is exposed as
``floatlab.plots.error_profile``.

>>> from floatlab.plots.errors import error_profile as moved
>>> error_profile is moved
True
"""

from floatlab.plots.errors import error_profile

__all__ = ["error_profile"]
