"""The split modules keep every import path that worked before the split (plots.py, explain.py,
formats.py and codec.py became small modules with one job each; callers, notebooks and other
helpers' code still import from the old homes), and matplotlib stays out of ``import floatlab``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import floatlab

# Old home -> the names callers import from it (grep of the repository at the split).
OLD_PATHS = {
    "floatlab.formats": ["Format", "FormatNameError", "get_format", "format_names",
                         "format_aliases", "PRESETS", "_ALIASES", "_AMBIGUOUS"],
    "floatlab.codec": ["encode", "decode", "fields", "Fields", "CLASSES", "codes_to_bin",
                       "codes_to_hex", "to_bin", "from_bin", "to_hex", "from_hex",
                       "float16_to_bin", "bin_to_float16", "bfloat16_to_bin", "bin_to_bfloat16",
                       "float32_to_bin", "bin_to_float32", "_codes_of_values",
                       "_decode_arithmetic"],
    "floatlab.explain": ["explain", "Explanation", "FIELD_COLOURS", "result_grid"],
    "floatlab.plots": ["FIELD_COLORS", "ZONE_COLORS", "ZONES", "bit_layout", "value_bits",
                       "number_line", "dynamic_range", "rounding_error", "zone_fractions",
                       "zones", "gradient_histogram", "training_curves", "loss_scale",
                       "underflow_over_time", "error_profile", "qsnr_by_scheme",
                       "scale_exponents", "block_before_after", "element_grids", "_axes",
                       "_percent", "_zone_spans", "_ZONE_TITLES"],
    "floatlab.plots_errors": ["error_profile"],
    "floatlab.mixed.policy": ["Policy", "get_policy", "PRECISIONS", "LEGACY_ALIASES",
                              "MATMUL_PRECISIONS", "OP_KINDS", "LAB_OPS", "STRUCTURAL_OPS",
                              "contains", "widest", "storage_dtype", "is_identity", "nbytes",
                              "accumulate_label", "refuse_scaler_for_bf16_mixed", "FP16",
                              "FP32", "FP64", "BF16", "TF32"],
    "floatlab.mixed.recipe": ["Recipe", "Gemm", "TensorScaling", "RowScaling", "Operand",
                              "is_tensorwise", "RECIPES", "get_recipe", "recipe_names",
                              "recipe_key", "msamp_scheme"],
}


@pytest.mark.parametrize("module", sorted(OLD_PATHS))
def test_old_import_paths_still_work(module):
    import importlib

    mod = importlib.import_module(module)
    missing = [name for name in OLD_PATHS[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"
    for name in getattr(mod, "__all__", []):
        assert hasattr(mod, name), f"{module}.__all__ names {name!r}, which is gone"


def test_public_functions_are_still_floatlab_attributes():
    # A submodule named like a function would replace it on the package when first imported.
    for name in ("explain", "format_names", "get_format", "to_bin", "error_profile"):
        assert callable(getattr(floatlab, name)), name


def test_format_name_error_keeps_its_public_module():
    # Tracebacks (and the README's tour) print floatlab.formats.FormatNameError.
    assert floatlab.FormatNameError.__module__ == "floatlab.formats"
    with pytest.raises(floatlab.FormatNameError, match="ambiguous"):
        floatlab.get_format("e4m3")


@pytest.mark.parametrize("first", ["floatlab.bitstrings", "floatlab.explanation",
                                   "floatlab.explain_steps", "floatlab.explain_html",
                                   "floatlab.formats.spec", "floatlab.formats.resolve",
                                   "floatlab.plots.errors", "floatlab.plots_errors",
                                   "floatlab.mixed.policy_specs", "floatlab.mixed.recipe_specs"])
def test_each_new_module_imports_first_in_a_fresh_interpreter(first):
    # Modules that import each other (codec <-> bitstrings, Format <-> its registry) must load
    # whichever is imported first; and none of the non-plot ones may pull in matplotlib.
    check = "" if "plots" in first else "; assert 'matplotlib' not in sys.modules, 'matplotlib'"
    code = f"import sys, {first}{check}"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_public_name_has_a_runnable_example():
    """Each function and class floatlab exports shows one use in its docstring (doctested with
    --doctest-modules); error_profile, FloatArray, Scheme, QuantizedTensor, ErrorProfile,
    Explanation, FormatComparison, Fields and FormatNameError had none."""
    import inspect

    import floatlab

    missing = [name for name in floatlab.__all__
               if (inspect.isclass(getattr(floatlab, name)) or callable(getattr(floatlab, name)))
               and ">>>" not in (getattr(floatlab, name).__doc__ or "")]
    assert missing == []
