"""The fp16 round-to-nearest matmul engines of floatlab.fp16_matmul against the emulated path.

``floatlab.matmul(a, b, Accumulator("fp16"))`` on float16 operands runs the magic-constant
engine (float64 passes, :func:`floatlab.fp16_matmul._float16_magic`) where no running sum can
overflow and the output is large enough, else NumPy's float64 -> float16 cast per addition.
Both must equal the general per-step path (TwoSum, round to odd, floatlab.round per addition)
bit for bit, signed zeros included, on data with ties, subnormals, sign changes, exact
cancellation, zero rows, tiny negative sums (which round to -0) and overflow.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import fp16_bound, fp16_matmul, fp16_plan, sequential
from floatlab.accumulate import Accumulator, _ProductTerms, _sequential

ACC = Accumulator("fp16")


def _fp16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def _emulated(a, b):
    terms = _ProductTerms(a, b, None)
    return _sequential(terms, ACC, keep=False, fast=False).reshape(a.shape[0], b.shape[1])


def _same_bits(x, y):
    np.testing.assert_array_equal(np.asarray(x).view(np.uint64), np.asarray(y).view(np.uint64))


def _cases(rng):
    n, k, m = 64, 24, 48  # 3072 outputs: the magic engine's size
    yield "random", _fp16(rng.standard_normal((n, k))), _fp16(rng.standard_normal((k, m)))
    # small integers times powers of two: many exact ties of fp16's grid in the running sums
    a = rng.integers(-40, 41, (n, k)) * 2.0 ** rng.integers(-4, 1, (n, k))
    b = rng.integers(-40, 41, (k, m)) * 2.0 ** rng.integers(-4, 1, (k, m))
    yield "ties", _fp16(a), _fp16(b)
    # subnormal products and sums (fp16's smallest normal is 2**-14)
    yield "subnormal", _fp16(rng.standard_normal((n, k)) * 2.0**-8), \
        _fp16(rng.standard_normal((k, m)) * 2.0**-9)
    # cancellation: the second half of the inner dimension undoes the first, sign changes
    a = _fp16(rng.standard_normal((n, k // 2)) * 30)
    b = _fp16(rng.standard_normal((k // 2, m)))
    yield "cancellation", np.concatenate([a, a], axis=1), np.concatenate([b, -b], axis=0)
    # zero rows, relu zeros, and rows whose tiny negative products round to -0 in fp16
    a = _fp16(np.maximum(rng.standard_normal((n, k)), 0))
    a[3] = 0.0
    a[5] = 2.0**-20
    b = _fp16(rng.standard_normal((k, m)))
    b[:, 7] = -(2.0**-10)
    yield "zeros", a, b
    # dead units: zero columns of both signs (products +0 and -0, all-zero sums), next to a column
    # whose tiny negative products round to -0: zero totals scattered over many rows
    a = _fp16(np.maximum(rng.standard_normal((n, k)), 0))
    a[:, 2] = -0.0
    a[9] = -a[9]
    b = _fp16(rng.standard_normal((k, m)))
    b[:, 4] = np.where(rng.random(k) < 0.5, -0.0, 0.0)
    b[:, 6] = -(2.0**-40)
    yield "dead", a, b
    # the lab's operands: ReLU zeros times GradScaler-scaled gradients (2**16 * dL/dz, up to
    # ~100), a ragged inner dimension (not a multiple of the BLAS product blocks) and float16
    # values from several binades
    x = _fp16(np.maximum(rng.standard_normal((n, k - 1)) * 3, 0))
    g = _fp16(rng.standard_normal((k - 1, m)) * rng.choice([2.0**-10, 1.0, 40.0], (k - 1, m)))
    yield "lab", x, g
    # overflow: the bound refuses the magic engine, the cast path gives inf
    yield "overflow", _fp16(rng.standard_normal((n, k)) * 200), \
        _fp16(rng.standard_normal((k, m)) * 200)


CASES = ["random", "ties", "subnormal", "cancellation", "zeros", "dead", "lab", "overflow"]
PRODUCTS = ["blas-products", "broadcast-products", "outer-products"]


def _make_products(products, monkeypatch):
    """The dense loop's products by BLAS blocks, by one broadcast multiply per block, or by
    _outer_blocks (one multiply per inner index into the magic buffer, on every shape)."""
    monkeypatch.setattr(fp16_plan, "_FAST_BLAS_PRODUCTS", products == "blas-products")
    monkeypatch.setattr(fp16_plan, "_FAST_OUTER", products == "outer-products")
    monkeypatch.setattr(fp16_plan, "_OUTER_MIN_COLUMNS", 1)
    monkeypatch.setattr(fp16_plan, "_OUTER_MIN_ROWS", 1)
    calls = []
    real = fp16_matmul._outer_blocks
    monkeypatch.setattr(fp16_matmul, "_outer_blocks",
                        lambda *args: calls.append(args[0].shape) or real(*args))
    return calls


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "clamped"])
@pytest.mark.parametrize("products", PRODUCTS)
@pytest.mark.parametrize("case", CASES)
def test_fp16_matmul_engines_equal_the_emulated_path(case, products, scale, monkeypatch):
    outer_calls = _make_products(products, monkeypatch)
    monkeypatch.setattr(fp16_matmul, "_FAST_SCALE", scale)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    rng = np.random.default_rng(11)
    _, a, b = next(c for c in _cases(rng) if c[0] == case)
    applies = fp16_matmul._float16_magic_applies(a, b)
    assert applies == (case != "overflow")
    # the scaled loop runs wherever the products' lowest bits allow (fp16 x fp16 products of
    # values from 2**-14 up: "dead" has 2**-40 operands, "zeros" 2**-20 times 2**-10 ...)
    assert fp16_matmul._float16_scale_applies(a, b) == (scale and case not in ("dead",))
    want = _emulated(a, b)
    fast = floatlab.matmul(a, b, ACC)
    _same_bits(fast, want)
    _same_bits(fp16_matmul._float16_cast_products(a, b), want)
    if applies:
        _same_bits(fp16_matmul._float16_magic(a, b), want)
        # the transposed problem (the engine transposes when the last axis is the shorter)
        _same_bits(fp16_matmul._float16_magic(b.T, a.T), want.T)
        # several tiles of rows, the last one short
        _same_bits(fp16_matmul._float16_magic(a, b, tile=5 * b.shape[1]), want)
    assert not outer_calls or products == "outer-products"  # (every case runs it: below)
    if case == "zeros":
        assert np.signbit(want[5]).any() and (want[5] == 0).any()  # -0 totals occur
    if case == "dead":  # +0 and -0 totals in every row
        assert (want == 0).any(axis=1).all() and (np.signbit(want) & (want == 0)).any()
    if case == "overflow":
        assert np.isinf(want).any()


@pytest.mark.parametrize("plan", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["dense", "dense-transposed", "compact-rows", "compact-columns"])
@pytest.mark.parametrize("case", CASES[:-1])
@pytest.mark.parametrize("fast_order", [True, False], ids=["flatnonzero", "argsort"])
@pytest.mark.parametrize("products", ["blas-products", "outer-products"])
def test_every_loop_order_equals_the_emulated_path(case, plan, fast_order, products,
                                                   monkeypatch):
    # _float16_plan picks the loop by a cost model; every choice must give the same bits:
    # zero products left out of a's rows or b's columns (sorted by their count of nonzeros),
    # with whole tiles of all-zero rows (no addition at all), and several tiles, the last short;
    # the nonzeros' order by flatnonzero or by argsort (_FAST_ORDER); the dense loops'
    # products by BLAS blocks or by _outer_blocks
    monkeypatch.setattr(fp16_plan, "_FAST_ORDER", fast_order)
    outer_calls = _make_products(products, monkeypatch)
    rng = np.random.default_rng(11)
    _, a, b = next(c for c in _cases(rng) if c[0] == case)
    a, b = a.copy(), b.copy()
    a[10:16], b[:, 20:26] = 0.0, -0.0
    want = _emulated(a, b)
    monkeypatch.setattr(fp16_matmul, "_float16_plan", lambda a, b, tile, counts=None: plan)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    calls = []
    compact_blocks = fp16_matmul._compact_blocks
    monkeypatch.setattr(fp16_matmul, "_compact_blocks",
                        lambda *args: calls.append(1) or compact_blocks(*args))
    for scale in (True, False):
        monkeypatch.setattr(fp16_matmul, "_FAST_SCALE", scale)
        _same_bits(fp16_matmul._float16_magic(a, b), want)
        _same_bits(fp16_matmul._float16_magic(a, b, tile=5 * b.shape[1]), want)
        _same_bits(fp16_matmul._float16_magic(a, b, tile=7 * a.shape[0]), want)
    assert bool(calls) == plan[0]  # the compact loop ran where asked, and only there
    assert bool(outer_calls) == (not plan[0] and products == "outer-products")


def test_the_plan_leaves_out_relu_zeros():
    # the lab's hidden layer: half of x's entries are ReLU zeros, so the compact loop on x's
    # rows does about half the additions; dense operands keep the dense loop
    rng = np.random.default_rng(3)
    x = _fp16(np.maximum(rng.standard_normal((512, 64)), 0))
    w = _fp16(rng.standard_normal((64, 64)) * 0.1)
    assert fp16_plan._float16_plan(x, w, fp16_matmul._TILE_OUTPUTS) == (True, False)
    assert fp16_plan._float16_plan(w.T, x.T, fp16_matmul._TILE_OUTPUTS) == (True, True)
    assert fp16_plan._float16_plan(np.abs(x) + 1, w, fp16_matmul._TILE_OUTPUTS)[0] is False


def test_the_scaled_loop_runs_where_it_pays():
    # two passes fewer per addition against a check and two scalings: worth it on the lab's
    # products (fwd 1: 32K outputs x 16 additions; fwd 3: 2K outputs x 64, measured 0.38
    # against 0.41 ms), not on a small one with few additions
    rng = np.random.default_rng(5)
    x = _fp16(rng.standard_normal((512, 16)))
    w = _fp16(rng.standard_normal((16, 64)) * 0.1)
    tile = fp16_matmul._TILE_OUTPUTS
    assert fp16_matmul._float16_scale_pays(w.T, x.T, tile)
    w3, x2 = _fp16(rng.standard_normal((4, 64))), _fp16(rng.standard_normal((64, 512)))
    assert fp16_matmul._float16_scale_pays(w3, x2, tile, known=True)
    small_a, small_b = _fp16(rng.standard_normal((8, 4))), _fp16(rng.standard_normal((4, 16)))
    assert not fp16_matmul._float16_scale_pays(small_a, small_b, tile, known=True)
    # dgrad 3 (32K outputs x 4 additions) too, whether or not the formats are known
    w, g = _fp16(rng.standard_normal((64, 4))), _fp16(rng.standard_normal((4, 512)))
    assert fp16_matmul._float16_scale_pays(w, g, tile, known=True)
    assert fp16_matmul._float16_scale_pays(w, g, tile)


def test_bits_bounds_the_significant_bits():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, 40))
    assert sequential._bits(_fp16(x)) == 11
    assert sequential._bits(x.astype(np.float32).astype(np.float64)) == 24
    assert sequential._bits(x) == 53
    assert sequential._bits(_fp16(x).T) == 11  # any strides
    y = _fp16(x)
    y[3, 4] = np.nan
    assert sequential._bits(y) == 53
    y[3, 4] = np.inf
    assert sequential._bits(y) == 11
    # values beyond float16's range with few bits: still a valid bound
    assert sequential._bits(np.array([2.0**100, 3 * 2.0**-60])) == 11


@pytest.mark.parametrize("block", [1, 2, 3, 4, 7])
def test_blas_products_are_the_float64_products(block, monkeypatch):
    # _product_blocks by BLAS against NumPy's float64 multiply, value for value (zero signs
    # aside, which the magic engine never reads): every block size, a ragged last block,
    # subnormal float64 products, zeros of both signs and 35-bit products (float32 times
    # float16 values, the widest the fp16 engines see).
    monkeypatch.setattr(fp16_plan, "_PRODUCT_BLOCK_INDICES", block)
    rng = np.random.default_rng(block)
    a = rng.standard_normal((9, 11)) * 2.0 ** rng.integers(-30, 30, (9, 11))
    b = rng.standard_normal((11, 13)) * 2.0 ** rng.integers(-20, 10, (11, 13))
    a = a.astype(np.float32).astype(np.float64)
    b = _fp16(b)
    a[0, 0], a[1, 2], b[3, 4] = -0.0, 2.0**-1000, -0.0
    b[2, :] = 2.0**-60  # with a[1, 2]: products below float64's normal range
    got = np.concatenate([part.copy() for part in fp16_plan._product_blocks(a, b)])
    want = a.T[:, :, None] * b[:, None, :]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------ the scaled engine (no clamp): every fp16 sum


def _sig_bits(x):
    """Significant bits of each float64 (0 for zero)."""
    mant = (x.view(np.uint64) & np.uint64((1 << 52) - 1)) | np.uint64(1 << 52)
    trailing = np.zeros(x.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):  # count trailing zeros of the 53-bit significand
        low = (mant & np.uint64((1 << shift) - 1)) == 0
        trailing += np.where(low, shift, 0)
        mant = np.where(low, mant >> np.uint64(shift), mant)
    return np.where(x == 0, 0, 53 - trailing)


def _adversarial_sums():
    """Every finite fp16 running sum t with products p that put t + p on, beside and across
    fp16's ties and grid points (its own binade, the ones above and below, the subnormals),
    across zero and onto zero, and random fp16 x fp16 products."""
    t = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    t = t[np.isfinite(t)].astype(np.float64)
    with np.errstate(over="ignore"):  # (fp16's max has no next value: its quantum is 32)
        ulp = np.spacing(np.abs(t).astype(np.float16)).astype(np.float64)  # fp16 quantum at t
    ulp[~np.isfinite(ulp)] = 32.0
    rng = np.random.default_rng(5)
    ps = [k * ulp / 4 for k in range(-12, 13)]
    for j in (1, 2, 11, 20, 29):  # near ties of this quantum and of the next ones
        for q in (ulp / 2, ulp, 2 * ulp):
            ps += [q * (1 - 2.0**-j), q * (1 + 2.0**-j), -q * (1 - 2.0**-j), -q * (1 + 2.0**-j)]
    tiny = [0.0, 2.0**-25, 3 * 2.0**-26, 2.0**-24, 3 * 2.0**-25, 2.0**-14, 2.0**-13,
            2.0**-14 - 2.0**-25, 2.0**-13 - 2.0**-25, 2.0**-40, 2.0**-60, 3 * 2.0**-65]
    for d in tiny:  # across and onto zero, into the subnormals and out of them
        ps += [-t + d, -t - d, -2 * t + d]
    for j in (41, 42, 43, 52, 53):  # sums within a few float64 ulps of a power of two t, where
        for odd in (1, 3, 2**10 + 1):  # w * (2**42 +- 1) leaves the binade (see
            ps += [t * 2.0**-j * odd, -t * 2.0**-j * odd]  # fp16_matmul._float16_scale_applies)
    for _ in range(8):  # random fp16 x fp16 products of the magnitudes around t
        x = _fp16(rng.standard_normal(t.size) * 4)
        with np.errstate(over="ignore"):
            y = _fp16(ulp * 2.0 ** rng.integers(-3, 12, t.size) * rng.standard_normal(t.size))
        ps.append(x * y)
    tt = np.concatenate([t] * len(ps))
    pp = np.concatenate(ps)
    with np.errstate(over="ignore", invalid="ignore"):
        v = tt + pp
        exact = (v - tt == pp) & (v - pp == tt)  # no float64 rounding in t + p
        keep = (exact & (np.abs(v) < 65504) & (_sig_bits(pp) <= 40)
                & ((pp == 0) | (np.abs(pp) >= 2.0**-500)) & (np.mod(pp * 2.0**65, 1) == 0))
    return tt[keep], pp[keep]


@pytest.mark.parametrize("products", PRODUCTS)
def test_scaled_engine_rounds_every_fp16_sum(products, monkeypatch):
    # One addition t + p for every finite fp16 value t and ~130 adversarial products each
    # (~8M sums), by the scaled engine (forced on: each pair meets its conditions, the
    # operand-wide bound would refuse the mix) against NumPy's float64 -> float16 cast of the
    # exact sum (one RNE rounding), and against the clamped engine.
    outer_calls = _make_products(products, monkeypatch)
    t, p = _adversarial_sums()
    assert t.size > 7_000_000
    a = np.stack([t, p], axis=1)  # out[i] = round(round(0 + t[i]) + p[i]) = round(t[i] + p[i])
    b = np.ones((2, 1))
    want = (t + p).astype(np.float16).astype(np.float64)
    want[want == 0] = np.where(np.signbit(t + p), -0.0, 0.0)[want == 0]  # the cast's -0 rule
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_applies", lambda *args, **kwargs: True)
    scaled = fp16_matmul._float16_magic(a, b)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_applies", lambda *args, **kwargs: False)
    clamped = fp16_matmul._float16_magic(a, b)
    assert bool(outer_calls) == (products == "outer-products")
    nonzero = want != 0  # zero totals are replayed for their sign by the cast path
    _same_bits(scaled[:, 0][nonzero], want[nonzero])
    _same_bits(clamped, scaled)
    # the tests above reached every kind of sum
    assert (np.abs(want) < 2.0**-14).sum() > 10_000 and (want == 0).sum() > 50_000
    midpoint = np.mod((t + p) * 2.0**25, 2) == 1  # exact fp16 ties in the subnormal range
    assert (midpoint & (np.abs(t + p) < 2.0**-14)).sum() > 1000
    # sums just below a power of two whose last float64 bit is set (M = +w * 2**42 would
    # round those to the wrong quantum) and just above one (where -w * 2**42 leaves the binade)
    v = np.abs(t + p)
    v = v[v > 0]
    power = 2.0 ** np.floor(np.log2(v))
    below = (2 * power - v) / np.spacing(v)
    assert ((below <= 2**11) & (np.mod(below, 2) == 1) & (v >= 2.0**-13)).sum() > 50
    assert (((v - power) / np.spacing(v) <= 2**10) & (v > power) & (v >= 2.0**-13)).sum() > 100


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "clamped"])
def test_outer_products_restore_the_ufunc_buffer_size(scale, monkeypatch):
    # _outer_blocks' loop runs under np.setbufsize(64): the caller's buffer size (the default
    # or their own) comes back after the product, and after an exception inside the loop
    monkeypatch.setattr(fp16_matmul, "_FAST_SCALE", scale)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    calls = []
    real = fp16_matmul._outer_blocks
    monkeypatch.setattr(fp16_matmul, "_outer_blocks",
                        lambda *args: calls.append(args[3] is not None) or real(*args))
    rng = np.random.default_rng(6)
    a, b = _fp16(rng.standard_normal((32, 8))), _fp16(rng.standard_normal((8, 256)) * 0.1)
    old = np.setbufsize(1024)
    try:
        _same_bits(floatlab.matmul(a, b, ACC), _emulated(a, b))
        assert calls == [scale] and np.getbufsize() == 1024  # (default thresholds: outer)

        def failing(*args):  # one step's products, then an error inside the loop
            steps = real(*args)
            yield next(steps)
            assert np.getbufsize() == fp16_plan._OUTER_BUFSIZE  # (the loop's own size)
            raise RuntimeError("inside the loop")

        monkeypatch.setattr(fp16_matmul, "_outer_blocks", failing)
        with pytest.raises(RuntimeError, match="inside the loop"):
            floatlab.matmul(a, b, ACC)
        assert np.getbufsize() == 1024
    finally:
        np.setbufsize(old)


@pytest.mark.parametrize("keep", [True, False], ids=["kept-buffers", "fresh-buffers"])
def test_scratch_buffers_never_leak_into_results_or_inputs(keep, monkeypatch):
    # the engines reuse per-thread work buffers (_scratch): a result must not change when the
    # next product runs, inputs are never written, and buffers too large to keep give the same
    # bits
    if not keep:
        monkeypatch.setattr(fp16_plan, "_SCRATCH_MAX", 0)
    rng = np.random.default_rng(4)
    cases = {name: (a, b) for name, a, b in _cases(rng)}
    a, b = cases["lab"]
    a0, b0 = a.copy(), b.copy()
    first = floatlab.matmul(a, b, ACC)
    kept = first.copy()
    for name in ("random", "zeros", "dead", "lab"):
        floatlab.matmul(*cases[name], ACC)
        floatlab.matmul(cases[name][1].T, cases[name][0].T, ACC)
    _same_bits(first, kept)
    _same_bits(first, _emulated(a0, b0))
    _same_bits(a, a0)
    _same_bits(b, b0)


def _bound_cases(rng):
    """Operands around the overflow bound's edge, and with zeros, inf and NaN."""
    for case, a, b in _cases(rng):
        yield case, a, b
    base_a, base_b = _fp16(rng.random((40, 30))), _fp16(rng.random((30, 20)))
    peak = min(float(base_a.sum(axis=1).max() * base_b.max()),
               float(base_a.max() * base_b.sum(axis=0).max()))
    edge = 65504.0 / (peak * (1 + 2.0**-11) ** 30 * (1 + 2.0**-30))
    for ulps in range(-24, 25):  # the bound a few float64 ulps below and above 65504
        scale = edge * (1 + ulps * 2.0**-52)
        yield f"edge{ulps}", base_a * scale, base_b
    zeros = np.zeros((8, 5))
    yield "all-zero", zeros, np.zeros((5, 7))
    for special in (np.inf, -np.inf, np.nan):
        a = base_a.copy()
        a[3, 4] = special
        yield f"a-{special}", a, base_b
        b = base_b.copy()
        b[7, 2] = special
        yield f"b-{special}", base_a, b
        yield f"b-{special}-zero-a", np.zeros_like(base_a), b


def test_the_overflow_bound_by_blas_sums_decides_as_numpy_sums(monkeypatch):
    # the row / column sums of the bound as matrix-vector products (_FAST_BOUND_SUMS): the
    # same decision as NumPy's reductions, at the threshold's edge and with inf / NaN
    rng = np.random.default_rng(17)
    decisions = set()
    for case, a, b in _bound_cases(rng):
        for x, y in ((a, b), (b.T, a.T)):
            monkeypatch.setattr(fp16_bound, "_FAST_BOUND_SUMS", True)
            fast = fp16_matmul._float16_magic_applies(x, y)
            monkeypatch.setattr(fp16_bound, "_FAST_BOUND_SUMS", False)
            assert fast == fp16_matmul._float16_magic_applies(x, y), case
            decisions.add((case[:4], fast))
            if case[0] in "ab" and "zero" not in case:
                assert not fast, case  # inf / NaN operands never take the magic engine
    assert ("edge", True) in decisions and ("edge", False) in decisions


def _old_bound(a, b):
    """The overflow bound before its stages: min(rows of |a| * max |b|, max |a| * columns of
    |b|) times the growth, from NumPy's sums."""
    if a.size == 0 or b.size == 0:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        abs_a, abs_b = np.abs(a), np.abs(b)
        peak = min(float(abs_a.sum(axis=1).max()) * float(abs_b.max()),
                   float(abs_a.max()) * float(abs_b.sum(axis=0).max()))
    return peak * (1 + 2.0**-11) ** a.shape[1] * (1 + 2.0**-30) < 65504.0


def test_the_cheap_overflow_stage_decides_as_the_sums(monkeypatch):
    # the first stage (K * max|a| * max|b|, _FAST_BOUND_MAX) only decides sooner: the same
    # decision as the row / column sums alone at the threshold's edge, with inf / NaN, -0 and
    # all-zero operands; and it decides alone where the sums are not needed (no |x| made)
    rng = np.random.default_rng(23)
    cases = list(_bound_cases(rng))
    base_a, base_b = _fp16(rng.random((40, 30))), _fp16(rng.random((30, 20)))
    edge = 65504.0 / (30 * float(base_a.max()) * float(base_b.max())
                      * (1 + 2.0**-11) ** 30 * (1 + 2.0**-30))
    for ulps in range(-24, 25):  # the cheap stage's own edge (the sums' bound lies below it)
        cases.append((f"cheap{ulps}", base_a * (edge * (1 + ulps * 2.0**-52)), base_b))
    negative = -base_a  # max |a| from the minimum, -0 entries
    negative[0] = -0.0
    cases.append(("negative", negative, base_b))
    for case, a, b in cases:
        for x, y in ((a, b), (b.T, a.T)):
            monkeypatch.setattr(fp16_bound, "_FAST_BOUND_MAX", True)
            staged = fp16_matmul._float16_magic_applies(x, y)
            monkeypatch.setattr(fp16_bound, "_FAST_BOUND_MAX", False)
            assert staged == fp16_matmul._float16_magic_applies(x, y), case
            assert staged == _old_bound(x, y), case  # the one-step bound the stages replaced
    monkeypatch.setattr(fp16_bound, "_FAST_BOUND_MAX", True)
    monkeypatch.setattr(fp16_bound.np, "abs", None)  # the cheap stage must not need |x|
    assert fp16_matmul._float16_magic_applies(base_a, base_b)


def test_zero_totals_take_their_sign_from_the_cast_path():
    # the magic engine's zero totals (+0 where the cast path may give -0) are replayed, and
    # only where a zero total occurs: "dead" and "zeros" have -0 totals, "random" none
    rng = np.random.default_rng(19)
    for case, a, b in _cases(rng):
        if case == "overflow":
            continue
        want = _emulated(a, b)
        _same_bits(fp16_matmul._float16_magic(a, b), want)
        _same_bits(fp16_matmul._float16_magic(b.T, a.T), want.T)


def test_nonzeros_in_order_are_the_stable_sorts():
    # _nonzeros_in_order against the stable argsort it replaces, at every row's nonzeros; past
    # a row's count a zero (the loop's padding): rows of no, one, some and all nonzeros, -0
    # entries (zeros), several widths, short rows and long
    rng = np.random.default_rng(29)
    for n, k in ((512, 64), (64, 512), (40, 7), (9, 1), (3, 33)):
        a = _fp16(rng.standard_normal((n, k))) * (rng.random((n, k)) < rng.random((n, 1)))
        a[0], a[-1] = 0.0, 1.0
        a[1, ::2] = -0.0
        a[2, :] = 0.0
        a[2, -1] = -3.0
        nonzero = a != 0
        counts = np.count_nonzero(nonzero, axis=1)
        steps = int(counts.max())
        starts = np.cumsum(counts) - counts  # (as the engine lists them)
        flat = np.flatnonzero(nonzero)
        values, index = fp16_plan._nonzeros_in_order(a, nonzero, flat, counts, steps,
                                                       np.arange(n), starts)
        order = np.argsort(~nonzero, axis=1, kind="stable")[:, :steps].T
        inside = np.arange(steps)[:, None] < counts[None, :]
        np.testing.assert_array_equal(index[inside], order[inside])
        _same_bits(values[inside], np.take_along_axis(a, order.T, axis=1).T[inside])
        assert not values[~inside].any()  # the padding: exact zeros of a (+0 or -0)
        # chosen rows in a chosen order (the compact loop's tiles of rows sorted by count)
        rows = rng.permutation(n)[: max(1, n // 2)]
        values, index = fp16_plan._nonzeros_in_order(a, nonzero, flat, counts[rows],
                                                       int(counts[rows].max()), rows,
                                                       starts[rows])
        steps = int(counts[rows].max())
        order = np.argsort(~nonzero[rows], axis=1, kind="stable")[:, :steps].T
        inside = np.arange(steps)[:, None] < counts[rows][None, :]
        np.testing.assert_array_equal(index[inside], order[inside])
        _same_bits(values[inside], np.take_along_axis(a[rows], order.T, axis=1).T[inside])
        assert not values[~inside].any()


def test_counts_of_nonzeros_by_blas_are_numpys(monkeypatch):
    # _count_nonzero (a 0 / 1 mask times ones) against np.count_nonzero: -0, NaN, inf,
    # subnormals, empty rows, transposed views, one row / one column
    rng = np.random.default_rng(31)
    x = rng.standard_normal((70, 130)) * (rng.random((70, 130)) < 0.5)
    x[0] = 0.0
    x[1, ::3] = -0.0
    x[2, :5] = [np.nan, np.inf, -np.inf, 5e-324, -5e-324]
    dense = rng.standard_normal((5, 9))  # no zeros: the counts without the mask's product
    dense[1, 2] = np.nan
    for arr in (x, x.T, x[:1], x[:, :1], np.zeros((3, 0)), dense, dense.T):
        for axis in (0, 1):
            want = np.count_nonzero(arr, axis=axis)
            for longest in (1 << 24, 0):  # float32 sums, and the float64 ones beyond 2**24
                monkeypatch.setattr(fp16_plan, "_COUNTS_FLOAT32", longest)
                got = fp16_plan._count_nonzero(arr, axis)
                np.testing.assert_array_equal(got, want)
                assert got.dtype == want.dtype
    monkeypatch.setattr(fp16_plan, "_COUNTS_FLOAT32", 1 << 24)
    # float32's edge: counts up to 2**24 are exact (a row of 2**24 - 2 nonzeros and two zeros;
    # one of 2**24 nonzeros and one more in float64), in any order of BLAS's sums
    long = np.ones((2, 1 << 24), dtype=np.float64)
    long[0, [5, -3]] = 0.0
    np.testing.assert_array_equal(fp16_plan._count_nonzero(long, 1), [(1 << 24) - 2, 1 << 24])
    del long
    wide = np.ones((2, (1 << 24) + 1))
    wide[1, 0] = 0.0
    np.testing.assert_array_equal(fp16_plan._count_nonzero(wide, 1), [(1 << 24) + 1, 1 << 24])


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "clamped"])
def test_engines_do_not_raise_their_own_underflow_under_errstate_raise(scale, monkeypatch):
    # The scaled loop computes in float64's subnormals by design and the float16 cast rounds
    # sums into fp16's subnormals: floatlab's rounding, which the emulated per-step path does
    # without a flag. A caller's np.errstate(all="raise") (or np.seterr) must not turn it into
    # a FloatingPointError, nor change a bit (it did: "underflow encountered in add / cast").
    monkeypatch.setattr(fp16_matmul, "_FAST_SCALE", scale)
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((64, 32)) * 1e-2, rng.standard_normal((32, 128)) * 1e-2
    # fp16 normals only (the scaled loop's condition), with products below 2**-13: float64
    # subnormals in the scaled loop
    a, b = (_fp16(np.where(np.abs(v) < 2.0**-14, 2.0**-14, v)) for v in (a, b))
    small = _fp16(rng.standard_normal((6, 20)) * 1e-3)  # below 1024 outputs: the cast path
    x = rng.standard_normal(5000) * 1e-6
    calls = [lambda: floatlab.matmul(a, b, ACC), lambda: floatlab.matmul(small, small.T, ACC),
             lambda: floatlab.sum(x, "fp16"), lambda: floatlab.cumsum(x, "fp16")]
    assert fp16_matmul._float16_scale_applies(a, b) == scale
    for call in calls:
        want = call()
        with np.errstate(all="raise"):
            got = call()
        _same_bits(got, want)
    _same_bits(floatlab.matmul(a, b, ACC), _emulated(a, b))
