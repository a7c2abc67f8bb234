"""Shared test setup: make tests/oracles.py importable and configure hypothesis."""


from __future__ import annotations

import os
import sys

# The lab's matrices are tiny: BLAS threads only add contention on CI's two cores (10-25x
# slower steps when the machine is busy). Set before NumPy loads BLAS; CI sets it too.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # `import oracles` works however pytest was started
    sys.path.insert(0, _TESTS)

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
else:
    # No deadline (the first call of a vectorised function is slow). The default profile is
    # derandomized, so a red run is reproducible from its log and CI never flickers;
    # HYPOTHESIS_PROFILE=dev explores new random examples, more of them.
    _common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("floatlab", max_examples=200, derandomize=True, **_common)
    settings.register_profile("dev", max_examples=2000, **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "floatlab"))
