"""Tests of floatlab.plots: every picture draws headless on every preset, with the right artists,
and every number it writes on a picture is right."""

from __future__ import annotations

import math
import subprocess
import sys
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.patches import Rectangle, StepPatch  # noqa: E402

import floatlab  # noqa: E402
from floatlab import Format, FormatNameError, get_format  # noqa: E402
from floatlab import plots as P  # noqa: E402

PRESETS = list(floatlab.PRESETS)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _step_patches(ax) -> list[StepPatch]:
    return [p for p in ax.patches if isinstance(p, StepPatch)]


# ----------------------------------------------------------------------------- laziness

def test_import_floatlab_does_not_import_matplotlib():
    code = (
        "import sys, floatlab; assert 'matplotlib' not in sys.modules, 'eager matplotlib'; "
        "import floatlab.plots; assert 'matplotlib.pyplot' not in sys.modules, 'eager pyplot'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- bit layouts

@pytest.mark.parametrize("name", PRESETS)
def test_bit_layout_draws_one_box_per_field_to_scale(name):
    fmt = get_format(name)
    ax = P.bit_layout(name)
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    widths = [1] * fmt.signed + [fmt.exp_bits] + [fmt.man_bits] * (fmt.man_bits > 0)
    assert [b.get_width() for b in boxes] == widths
    assert [b.get_x() for b in boxes] == list(np.cumsum([0] + widths[:-1]))
    assert f"{fmt.bits} bits, bias {fmt.bias}" in _texts(ax)
    assert [t.get_text() for t in ax.get_yticklabels()] == [fmt.name]


def test_bit_layout_side_by_side_rows_and_field_colours():
    ax = P.bit_layout(["fp32", "fp16", "bf16", "e8m0"])
    assert len(ax.patches) == 3 + 3 + 3 + 1
    # The same field has the same colour in every row.
    exponent_colours = {p.get_facecolor() for p in ax.patches if p.get_width() in (5, 8)}
    assert len(exponent_colours) == 1
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["float32", "float16", "bfloat16", "float8_e8m0fnu"]


def test_bit_layout_unknown_format_raises_format_name_error():
    with pytest.raises(FormatNameError):
        P.bit_layout(["fp16", "fp17"])


@pytest.mark.parametrize("name", PRESETS)
def test_value_bits_shows_the_encoded_bits(name):
    fmt = get_format(name)
    ax = P.value_bits(1.0, name)
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(cells) == fmt.bits
    digits = "".join(_texts(ax)[: fmt.bits])
    assert digits == floatlab.to_bin(1.0, name)
    assert _texts(ax)[-1].endswith("= 1.0")  # the closing formula gives the value


def test_value_bits_rounds_and_explains_fields():
    ax = P.value_bits(3.141, "fp16")
    texts = _texts(ax)
    assert "".join(texts[:16]) == "0100001001001000"
    assert any("10000 = 16" in t and "2^1" in t for t in texts)
    assert any("1001001000 = 584" in t for t in texts)
    assert texts[-1] == "= +2^1 × 1.5703125 = 3.140625"
    assert "3.141 → 3.140625" in ax.get_title() and "0x4248" in ax.get_title()


def test_value_bits_subnormal_and_special_codes():
    ax = P.value_bits(-1e-6, "fp16")
    assert "subnormal" in ax.get_title()
    assert any("0 + 17/2^10" in t for t in _texts(ax))
    ax = P.value_bits(float("inf"), "fp16")
    assert _texts(ax)[-1] == "= inf"
    ax = P.value_bits(1e6, "e4m3fn")  # overflow -> the NaN code 0x7f
    assert "0x7f" in ax.get_title() and _texts(ax)[-1] == "= nan"


# ----------------------------------------------------------------------------- number line

def _segments_x(collection: LineCollection) -> list[float]:
    return [float(seg[0][0]) for seg in collection.get_segments()]


@pytest.mark.parametrize("name", [n for n in PRESETS if get_format(n).bits <= 8])
def test_number_line_small_formats_draw_every_value(name):
    fmt = get_format(name)
    values = floatlab.decode(np.arange(1 << fmt.bits), fmt)
    finite = np.unique(values[np.isfinite(values)])
    ax = P.number_line(name)
    lines = [c for c in ax.collections if isinstance(c, LineCollection)]
    drawn = sorted(x for c in lines for x in _segments_x(c))
    assert drawn == sorted(finite[finite >= 0].tolist())
    subnormal = sorted(_segments_x(lines[1]))
    expected = finite[(finite > 0) & (finite < fmt.smallest_normal)]
    assert subnormal == expected.tolist()
    assert len(lines) == 2 + fmt.has_zero  # normal, subnormal, zero
    assert ax.get_xscale() == ("symlog" if fmt.has_zero else "log")


def test_number_line_negative_half_and_labels():
    ax = P.number_line("e2m1", negative=True)
    drawn = sorted(x for c in ax.collections for x in _segments_x(c))
    assert drawn == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    ax = P.number_line("e2m1")
    assert [t for t in _texts(ax) if t[0].isdigit()] == ["0.5", "1", "1.5", "2", "3", "4", "6"]
    assert "beyond max: saturates to 6" in _texts(ax)
    assert "beyond max: NaN" in _texts(P.number_line("e4m3fn"))


def test_number_line_negative_half_of_formats_without_zero():
    # a format with no zero got a log axis, which cannot show negatives: the negative half
    # asked for was missing, and matplotlib warned 'Attempt to set non-positive xlim ...'
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = P.number_line("e2m1_nozero", negative=True)
        lo, hi = ax.get_xlim()
        drawn = sorted(x for c in ax.collections for x in _segments_x(c))
        assert drawn == [-3, -2, -1.5, -1, -0.75, -0.5, 0.5, 0.75, 1, 1.5, 2, 3]
        assert ax.get_xscale() == "symlog" and lo < min(drawn) < 0 < max(drawn) < hi
        assert lo == -hi
        ax = P.number_line("e8m0", negative=True)  # unsigned: nothing negative to draw
        assert ax.get_xscale() == "log" and ax.get_xlim()[0] > 0


@pytest.mark.parametrize("name", [n for n in PRESETS if get_format(n).bits > 8])
def test_number_line_wide_formats_show_values_per_binade(name):
    fmt = get_format(name)
    ax = P.number_line(name)
    stairs = _step_patches(ax)
    assert len(stairs) == 1 + (fmt.smallest_subnormal is not None)
    normal = stairs[0].get_data()
    assert normal.edges[0] == fmt.emin and normal.edges[-1] == fmt.emax + 1
    assert set(normal.values.tolist()) == {float(fmt.man_bits)}  # log2(2^M values)
    if len(stairs) == 2:  # subnormal binades hold 2^0, 2^1, ..., 2^(M-1) values
        sub = stairs[1].get_data()
        assert sub.values.tolist() == list(range(fmt.man_bits))
        assert sub.edges[0] == math.log2(fmt.smallest_subnormal)


# ----------------------------------------------------------------------------- dynamic range

@pytest.mark.parametrize("name", PRESETS)
def test_dynamic_range_bars_span_the_format_range(name):
    fmt = get_format(name)
    ax = P.dynamic_range(name)
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 1 + (fmt.smallest_subnormal is not None)
    normal = bars[0]
    assert normal.get_x() == fmt.emin
    assert normal.get_x() + normal.get_width() == pytest.approx(math.log2(fmt.max))
    if len(bars) == 2:
        sub = bars[1]
        assert sub.get_hatch() and sub.get_x() == math.log2(fmt.smallest_subnormal)
        assert sub.get_x() + sub.get_width() == fmt.emin
    assert any(f"p = {fmt.p} bit" in t for t in _texts(ax))


def test_dynamic_range_bf16_keeps_fp32_range_fp16_keeps_precision():
    ax = P.dynamic_range(["fp32", "bf16", "fp16"])
    normal = [p for p in ax.patches if not p.get_hatch()]
    ends = [p.get_x() + p.get_width() for p in normal]
    assert ends[1] == pytest.approx(ends[0], abs=0.01) and ends[2] < ends[1] - 100
    texts = _texts(ax)
    assert any("p = 8 bits" in t for t in texts) and any("p = 11 bits" in t for t in texts)
    lo, hi = ax.get_xlim()
    assert lo < -149 and hi > 128


# ----------------------------------------------------------------------------- rounding error

def _bound(x: np.ndarray, fmt: Format) -> np.ndarray:
    """ulp(x) / (2x), independently of plots.py."""
    _, e = np.frexp(x)
    ulp = np.ldexp(1.0, np.maximum(e - 1, fmt.emin) - fmt.man_bits)
    return ulp / 2 / x  # not ulp / (2x): 2x overflows at float64 max


@pytest.mark.parametrize("name", PRESETS)
def test_rounding_error_sawtooth_bounds_the_actual_errors(name):
    fmt = get_format(name)
    ax = P.rounding_error(name)
    assert len(ax.lines) == 1
    xs, ys = ax.lines[0].get_data()
    normal = xs >= fmt.emin
    assert ys[normal].max() == -fmt.p  # the teeth peak at u = 2^-p ...
    assert ys[normal].min() >= -fmt.p - 1  # ... and fall to u/2
    last = float(_bound(np.array([fmt.max]), fmt)[0])
    assert (xs[-1], ys[-1]) == pytest.approx((math.log2(fmt.max), math.log2(last)))
    if fmt.has_zero:
        assert ys[0] == 0  # values that flush lose 100%
    if fmt.p < 53:  # the dots are floatlab.round's actual errors, all under the curve
        (dots,) = ax.collections
        sx, sy = dots.get_offsets().T
        assert len(sx) > 100
        assert np.all(2.0**sy <= _bound(2.0**sx, fmt) * (1 + 1e-9))
        assert np.max(2.0**sy / _bound(2.0**sx, fmt)) > 0.9  # and the bound is tight


def test_rounding_error_several_formats_ulp_and_bad_kind():
    ax = P.rounding_error(["fp16", "bf16", "e4m3fn"], lo=1e-8, hi=1e5)
    assert len(ax.lines) == 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "float16 (u = 2^-11)", "bfloat16 (u = 2^-8)", "float8_e4m3fn (u = 2^-4)"]
    assert ax.get_xlim() == pytest.approx((math.log2(1e-8), math.log2(1e5)))
    ax = P.rounding_error("fp16", kind="ulp")
    xs, ys = ax.lines[0].get_data()
    assert ys.min() == -24 and ys.max() == 15 - 10  # smallest subnormal .. ulp at max
    with pytest.raises(ValueError, match="kind"):
        P.rounding_error("fp16", kind="absolute")


def test_rounding_error_window_beyond_a_formats_range():
    # a zoom above fp16's max has no fp16 samples to draw: it
    # failed in numpy's uniform ('high - low < 0') instead of drawing the other formats
    ax = P.rounding_error(["fp16", "bf16"], lo=1e10, hi=1e20)
    assert len(ax.lines) == 2 and len(ax.collections) == 2
    assert len(ax.collections[0].get_offsets()) == 0  # fp16: no dots beyond its max
    assert len(ax.collections[1].get_offsets()) > 100
    assert ax.get_xlim() == pytest.approx((math.log2(1e10), math.log2(1e20)))


# ----------------------------------------------------------------------------- zone fractions

def _one_of_each(fmt: Format) -> tuple[list[float], dict[str, int]]:
    """Data with known zone counts for any format."""
    data = [0.0, 0.0, 1.0, -fmt.max, fmt.smallest_normal]
    counts = {"zero": 2, "normal": 3, "subnormal": 0, "flushed": 1, "overflow": 2, "nan": 0}
    data += [fmt.max * 4, -np.inf]
    if fmt.smallest_positive / 4 > 0:  # no float64 value flushes in float64
        data.append(fmt.smallest_positive / 4)
    else:
        counts["flushed"] = 0
    if fmt.smallest_subnormal is not None:
        data += [fmt.smallest_subnormal, -(fmt.smallest_normal - fmt.smallest_subnormal)]
        counts["subnormal"] = 2
    return data, counts


@pytest.mark.parametrize("name", PRESETS)
def test_zone_fractions_exact_on_constructed_data(name):
    fmt = get_format(name)
    data, counts = _one_of_each(fmt)
    fractions = P.zone_fractions(data, name)
    assert fractions == {k: counts[k] / len(data) for k in fractions}
    assert set(fractions) == set(counts)
    assert sum(fractions.values()) == pytest.approx(1.0)


def _unbounded(fmt: Format) -> Format:
    """The same significand with one more exponent bit on top and below: rounds like ``fmt``
    but neither overflows near fmt.max nor flushes / clamps near its smallest values."""
    extra = 2 ** (fmt.exp_bits - 1)
    return Format(exp_bits=fmt.exp_bits + 2, man_bits=fmt.man_bits, bias=fmt.bias + extra,
                  signed=fmt.signed, special="none", subnormals=fmt.subnormals,
                  has_zero=fmt.has_zero)


def _zones_by_rounding(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Each value's zone decided by floatlab.round alone (the oracle for zone_fractions)."""
    zone = np.full(x.shape, "normal", dtype=object)
    if fmt.exp_bits < 11:
        wide = np.abs(floatlab.round(np.abs(x), _unbounded(fmt)))
        zone[wide > fmt.max] = "overflow"
        lost = wide < fmt.smallest_positive if not fmt.has_zero else np.zeros(x.shape, bool)
    else:
        lost = np.zeros(x.shape, bool)
    r = np.abs(floatlab.round(np.abs(x), fmt, saturate=True))
    if fmt.has_zero:
        lost = r == 0
    zone[(r < fmt.smallest_normal) & ~lost & (zone != "overflow")] = "subnormal"
    zone[lost] = "flushed"
    zone[np.isinf(x)] = "overflow"  # beyond float64 itself (float64 data scaled up)
    return zone


def _threshold_probes(fmt: Format) -> np.ndarray:
    """Values at, just below and just above every zone boundary, plus log-uniform values."""
    marks = [fmt.max, fmt.smallest_normal]
    if fmt.smallest_subnormal is not None:
        marks += [fmt.smallest_subnormal, fmt.smallest_subnormal / 2]
    ulp_max = math.ldexp(1.0, fmt.emax - fmt.man_bits)
    marks += [fmt.max + ulp_max / 2, fmt.max + ulp_max / 4, fmt.max + ulp_max]
    below = math.ldexp(1.0, fmt.emin)
    marks += [below * (1 - 2.0 ** -(fmt.man_bits + 1)), below * (1 - 2.0 ** -(fmt.man_bits + 2))]
    marks = [m for m in marks if math.isfinite(m)]
    with np.errstate(over="ignore"):
        probes = [np.nextafter(m, d) for m in marks for d in (0, np.inf)] + marks
    probes = [p for p in probes if 0 < p < math.inf]  # float64: s/2 is 0, max + ulp is inf
    rng = np.random.default_rng(1)
    lo, hi = math.log2(fmt.smallest_positive) - 4, math.log2(fmt.max) + 2
    randoms = np.exp2(rng.uniform(max(lo, -1074), min(hi, 1023), 500))
    return np.concatenate([np.array(probes), randoms])


@pytest.mark.parametrize("name", PRESETS)
def test_zone_fractions_agree_with_the_rounding_core(name):
    fmt = get_format(name)
    probes = _threshold_probes(fmt)
    expected = _zones_by_rounding(probes, fmt)
    for x, zone in zip(probes, expected, strict=True):
        got = P.zone_fractions([x], fmt)
        assert got[zone] == 1.0, (x, zone, got)
    # And in bulk, with a scale: the fractions are the oracle's counts.
    with np.errstate(over="ignore"):
        scaled = _zones_by_rounding(probes * 8.0, fmt)
    fractions = P.zone_fractions(probes, fmt, scale=8.0)
    for zone in P.ZONES:
        assert fractions[zone] == np.count_nonzero(scaled == zone) / probes.size


def test_zone_fractions_inputs():
    assert P.zone_fractions({"w": [1.0, 0.0], "b": np.array([np.nan, 1e9])}, "fp16") == {
        "overflow": 0.25, "normal": 0.25, "subnormal": 0.0, "flushed": 0.0, "zero": 0.25,
        "nan": 0.25}
    assert P.zone_fractions(np.float16([1e-7, 1.0]), "fp16")["subnormal"] == 0.5
    with pytest.raises(ValueError, match="empty"):
        P.zone_fractions([], "fp16")
    with pytest.raises(ValueError, match="empty"):
        P.zones(np.array([]), "fp16")
    with pytest.raises(ValueError, match="scale"):
        P.zone_fractions([1.0], "fp16", scale=0)
    with pytest.raises(FormatNameError):
        P.zone_fractions([1.0], "fp8")  # ambiguous
    with pytest.raises(TypeError):
        P.zone_fractions(["a"], "fp16")


# ----------------------------------------------------------------------------- zones pictures

def test_percent_labels_never_hide_a_nonzero_share():
    assert [P._percent(f) for f in (0, 1, 1e-7, 5e-4, 0.125, 0.9995, 1 / 3)] == [
        "0%", "100%", "<0.001%", "0.05%", "12.5%", ">99.9%", "33.3%"]


@pytest.mark.parametrize("name", PRESETS)
def test_zones_annotates_exact_fractions(name):
    fmt = get_format(name)
    data, counts = _one_of_each(fmt)
    ax = P.zones(data, name)
    texts = _texts(ax)
    spans = P._zone_spans(fmt)
    assert len(texts) == len(spans)  # one label per zone the format has
    for text in texts:
        zone = next(z for z in P.ZONES if P._ZONE_TITLES[z] in text)
        assert P._percent(counts[zone] / len(data)) in text
    assert any(f"{P._percent(2 / len(data))} exact zeros" in t for t in _legend_texts(ax))
    heights = _step_patches(ax)[0].get_data().values
    finite_nonzero = sum(1 for v in data if v != 0 and np.isfinite(v))
    assert heights.sum() == pytest.approx(100 * finite_nonzero / len(data))


def test_zones_fp16_picture():
    data = np.array([0.0] * 2 + [1.0] * 4 + [2.0**-20] * 1 + [2.0**-30] * 1)
    ax = P.zones(data, "fp16")
    assert _texts(ax) == ["flushed to 0\n12.5%", "subnormal\n12.5%", "normal\n50.0%",
                          "overflow\n0%"]
    lo, hi = ax.get_xlim()
    assert lo < -25 and hi > 16  # every zone edge of fp16 is in view
    shaded = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(shaded) == 4
    assert ax.get_ylabel() == "% of all values"


def test_zones_wide_format_keeps_data_readable():
    data = np.exp2(np.random.default_rng(0).uniform(-30, 0, 1000))
    ax = P.zones(data, "float64")
    lo, hi = ax.get_xlim()
    assert lo >= -30 - 41 and hi <= 0 + 41  # float64's edges would squeeze the data
    assert "normal\n100%" in _texts(ax)
    assert any(t.startswith("← subnormal") for t in _texts(ax))  # off-axis zone, pointed at


# ----------------------------------------------------------------------------- gradients

def _grads() -> np.ndarray:
    rng = np.random.default_rng(0)
    g = rng.lognormal(-18, 3, 4000) * rng.choice([-1, 1], 4000)
    g[:1000] = 0.0
    return g


@pytest.mark.parametrize("name", PRESETS)
def test_gradient_histogram_every_preset(name):
    fmt = get_format(name)
    ax = P.gradient_histogram(_grads(), name)
    assert len(_step_patches(ax)) == 2
    assert len(_texts(ax)) == len(P._zone_spans(fmt))
    assert "exact zeros" in _legend_texts(ax)[0]


def test_gradient_histogram_before_and_after_fractions():
    g = _grads()
    ax = P.gradient_histogram(g, "fp16", scale=2.0**8)
    before, after = P.zone_fractions(g, "fp16"), P.zone_fractions(g, "fp16", scale=2.0**8)
    flushed = next(t for t in _texts(ax) if t.startswith("flushed"))
    assert flushed == (f"flushed to 0\n{P._percent(before['flushed'])} → "
                       f"{P._percent(after['flushed'])}")
    assert after["flushed"] < before["flushed"]
    assert _legend_texts(ax)[1] == "× loss scale $2^{8}$"
    unscaled, scaled = _step_patches(ax)
    shift = scaled.get_data().edges[0] - unscaled.get_data().edges[0]
    assert shift == 8  # the whole histogram slides 8 binades up


def test_gradient_histogram_auto_scale_and_no_scale():
    g = _grads()
    ax = P.gradient_histogram(g, "fp16")
    label = _legend_texts(ax)[1]
    k = int(label.split("{")[1].split("}")[0])
    assert np.max(np.abs(g)) * 2.0**k < 2.0**15 <= np.max(np.abs(g)) * 2.0 ** (k + 2)
    assert P.zone_fractions(g, "fp16", scale=2.0**k)["overflow"] == 0
    ax = P.gradient_histogram(g, "fp16", scale=1.0)
    assert len(_step_patches(ax)) == 1 and "→" not in "".join(_texts(ax))
    # gradients that all underflowed (or all went NaN): the error says how to draw them anyway
    for g in (np.zeros(5), [np.nan, 0.0, np.inf]):
        with pytest.raises(ValueError, match="no nonzero finite value.*pass scale=1.0 to draw"):
            P.gradient_histogram(g, "fp16")
        ax = P.gradient_histogram(g, "fp16", scale=1.0)
        assert len(_step_patches(ax)) == 1


# ----------------------------------------------------------------------------- training runs

def _runs():
    n = 6
    return {
        "32-true": {"loss": [1.0, 0.8, 0.6, 0.5, 0.45, 0.4], "accuracy": np.linspace(0.3, 0.9, n),
                    "underflow_fraction": np.zeros(n)},
        "16-mixed": {"loss": [1.0, 0.8, 0.6, 0.5, 0.45, 0.41],
                     "train_accuracy": np.linspace(0.3, 0.88, n),
                     "loss_scale": [8, 8, 4, 4, 4, 8],
                     "skipped": [False, False, True] + [False] * 3,
                     "underflow_fraction": np.full(n, 0.02)},
        "16-true": {"loss": [1.0, np.nan, np.nan, np.nan, np.nan, np.nan],
                    "accuracy": [0.25] * n, "underflow_fraction": np.ones(n)},
    }


def test_training_curves_one_line_per_precision_and_nan_marked():
    ax = P.training_curves(_runs())
    curves = [line for line in ax.lines if line.get_label() in _runs()]
    assert [c.get_label() for c in curves] == ["32-true", "16-mixed", "16-true"]
    assert curves[0].get_ydata().tolist() == [1.0, 0.8, 0.6, 0.5, 0.45, 0.4]
    assert _texts(ax) == ["NaN at step 1"]
    marker = next(line for line in ax.lines if line.get_marker() == "X")
    assert marker.get_xydata().tolist() == [[1.0, 1.0]]  # at the last finite value
    assert ax.get_ylabel() == "loss"


def test_training_curves_accuracy_alias_objects_and_steps():
    ax = P.training_curves(_runs(), metric="accuracy")
    assert len(ax.lines) == 3  # 16-mixed found through train_accuracy
    runs = [SimpleNamespace(label="bf16-mixed", loss=[3.0, 2.0], step=[10, 20]),
            SimpleNamespace(precision="16-mixed", loss=[3.0, 2.5], step=[10, 20])]
    ax = P.training_curves(runs)
    assert [line.get_label() for line in ax.lines] == ["bf16-mixed", "16-mixed"]
    assert ax.lines[0].get_xdata().tolist() == [10, 20]
    ax = P.training_curves({"loss": [1.0, 0.5], "label": "solo"})  # one bare history
    assert ax.lines[0].get_label() == "solo"
    with pytest.raises(ValueError, match="'accuracy'"):
        P.training_curves({"a": {"loss": [1.0]}}, metric="accuracy")
    with pytest.raises(ValueError, match="2 steps but 3"):
        P.training_curves({"loss": [1, 2, 3], "step": [0, 1]})
    with pytest.raises(TypeError):
        P.training_curves(42)


def test_loss_scale_trajectory_and_skipped_steps():
    ax = P.loss_scale(_runs())  # only 16-mixed has a scaler
    trajectory, skips = ax.lines
    assert trajectory.get_label() == "16-mixed"
    assert trajectory.get_ydata().tolist() == [8, 8, 4, 4, 4, 8]
    assert skips.get_xydata().tolist() == [[2.0, 4.0]]
    assert ax.get_yscale() == "log"
    assert "skipped steps (1)" in _legend_texts(ax)
    ax = P.loss_scale({"loss_scale": [4, 2, 1], "skipped": [0, 1]})  # step indices
    assert ax.lines[1].get_xdata().tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="loss_scale"):
        P.loss_scale({"fp32": {"loss": [1.0]}})


def test_underflow_over_time_in_percent():
    ax = P.underflow_over_time(_runs())
    assert len(ax.lines) == 3
    assert ax.lines[2].get_ydata().tolist() == [100.0] * 6
    assert ax.lines[1].get_ydata()[0] == pytest.approx(2.0)
    lo, hi = ax.get_ylim()
    assert lo < 0 and hi > 100  # 0% and 100% runs stay visible


# ----------------------------------------------------------------------------- composition

def test_every_function_draws_into_a_given_axes():
    fig, axs = plt.subplots(2, 5)
    calls = [
        lambda ax: P.bit_layout("fp16", ax=ax),
        lambda ax: P.value_bits(1.5, "bf16", ax=ax),
        lambda ax: P.number_line("e5m2", ax=ax),
        lambda ax: P.dynamic_range(np.float16, ax=ax),
        lambda ax: P.rounding_error("e4m3fn", ax=ax),
        lambda ax: P.zones([1.0, 2.0], "fp16", ax=ax),
        lambda ax: P.gradient_histogram([1e-8, 1e-6], "fp16", ax=ax),
        lambda ax: P.training_curves(_runs(), ax=ax),
        lambda ax: P.loss_scale(_runs(), ax=ax),
        lambda ax: P.underflow_over_time(_runs(), ax=ax),
    ]
    for ax, call in zip(axs.flat, calls, strict=True):
        assert call(ax) is ax
    assert len(plt.get_fignums()) == 1  # nothing opened a figure of its own
    fig.canvas.draw()  # and everything renders


def test_training_plots_read_the_labs_history_objects():
    from floatlab.mixed import Trainer, teacher_gaussians

    history = Trainer("16-mixed", progress=False).fit(teacher_gaussians(n=1024), steps=6)
    ax = P.training_curves({"16-mixed": history}, metric="loss")
    assert len(ax.get_lines()) == 1
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), history["loss"])
    ax = P.loss_scale(history)
    ax = P.underflow_over_time([history])
    assert len(ax.get_lines()) == 1
    plt.close("all")


def test_training_plots_accept_a_comparison_and_float_skip_flags():
    from floatlab.mixed import compare, teacher_gaussians

    result = compare(["32-true", "16-mixed"], steps=4, progress=False,
                     data=teacher_gaussians(n=1024))
    ax = P.training_curves(result, metric="accuracy")
    assert [line.get_label() for line in ax.get_lines()] == ["32-true", "16-mixed"]
    flags = {"loss_scale": [8.0, 8.0, 4.0], "skipped": [0.0, 0.0, 1.0]}  # as to_dict() stores
    ax = P.loss_scale(flags)
    assert "skipped steps (1)" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")
