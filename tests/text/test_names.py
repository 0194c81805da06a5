"""Names shortened by meaning to a width, and kept apart when they would look alike."""

from __future__ import annotations

from htatui.text.names import SHORT_LEVEL, fit_names, name_forms

SPLIT = (
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
    "<float, float, float, 5ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, long)"
)
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)"


def test_forms_drop_templates_then_arguments_then_namespaces() -> None:
    assert name_forms(SOFTMAX) == [
        SOFTMAX,
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward(float*, float const*, int)",
        "at::native::cunn_SoftMaxForward",
        "cunn_SoftMaxForward",
    ]
    assert name_forms("aten::mm")[SHORT_LEVEL] == "aten::mm"


def test_each_name_takes_the_longest_form_that_fits() -> None:
    assert fit_names([SOFTMAX, "aten::mm"], 32) == ["at::native::cunn_SoftMaxForward", "aten::mm"]
    assert fit_names([SOFTMAX], 20) == ["cunn_SoftMaxForward"]
    assert fit_names([SOFTMAX], 12) == ["cunn_…orward"]
    assert fit_names(["aten::mm"], 32, start=SHORT_LEVEL) == ["aten::mm"]


def test_names_that_would_look_alike_show_where_they_differ() -> None:
    other = SPLIT.replace("5ul>", "2ul>")
    shown = fit_names([SPLIT, other, SPLIT], 32)
    assert shown[0] == shown[2] and shown[0] != shown[1]
    assert all(len(name) <= 32 for name in shown)
    assert "5ul" in shown[0] and "2ul" in shown[1]
    assert shown[0].startswith("split_embeddin…")


def test_an_anonymous_namespace_leaves_no_empty_scope_in_a_short_name() -> None:
    """Issue 38 #6: `(anonymous namespace)` collapsed to `::::` in the app's short kernel names and
    the Ranks page's phases; HTA's own short name (the compat mode's) keeps it."""
    from htatui.analysis.core.names import readable_name, shorten_name
    from htatui.tui.widgets.table import short_kernel_name

    name = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)"
    assert shorten_name(name) == "at::native::::vectorized_layer_norm_kernel"
    assert readable_name(name) == short_kernel_name(name) == "at::native::vectorized_layer_norm_kernel"
    assert readable_name("void (anonymous namespace)::fill<int>(int)") == "fill"
