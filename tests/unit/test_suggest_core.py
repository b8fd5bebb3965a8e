"""The pure parts of `suggest`: op families and classes, platform families, the weight of a
round by its similarity, and the modules' own examples."""

from __future__ import annotations

import doctest
import math

import pytest

from ledger.core import knowledge, mechanisms, suggest
from ledger.core.suggest import op_class, op_family, platform_family, weight


@pytest.mark.parametrize("module", [mechanisms, suggest, knowledge])
def test_docstring_examples(module):
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0


@pytest.mark.parametrize(
    ("op", "family", "cls"),
    [
        ("add_rmsnorm", "normalization", "row-wise"),
        ("cross_entropy", "softmax", "row-wise"),
        ("cumsum", "reduction", "row-wise"),
        ("swiglu", "elementwise", "streaming"),
        ("transpose", "data-movement", "streaming"),
        ("embedding_gather", "data-movement", "streaming"),
        ("decode_attention", "attention", "contraction"),
        ("flash_attention", "attention", "contraction"),
        ("gemm", "matmul", "contraction"),
        ("gemv", "matmul", "contraction"),
        ("fused_moe", "matmul", "contraction"),
        ("causal_conv1d", "convolution", "convolution"),
        ("rotary_embedding", "elementwise", "streaming"),
        ("apply_rope", "elementwise", "streaming"),
        ("token_quant_int8", "elementwise", "streaming"),
        ("quant_matmul", "matmul", "contraction"),
        ("layer_norm", "normalization", "row-wise"),
        ("group_norm_fwd", "normalization", "row-wise"),
        ("argmax", "reduction", "row-wise"),
        ("topk", "reduction", "row-wise"),
        ("kv_cache_scatter", "data-movement", "streaming"),
        ("reshape_and_cache_flash", "data-movement", "streaming"),
        ("flash_attn_with_kvcache", "attention", "contraction"),
        ("ln_fwd", "normalization", "row-wise"),
        ("gn-forward", "normalization", "row-wise"),
        ("adamw", "elementwise", "streaming"),
        ("fused_sgd_step", "elementwise", "streaming"),
        ("w8a16_gemm", "matmul", "contraction"),
        ("col_sum", "reduction", "row-wise"),
        ("topk_softmax", "softmax", "row-wise"),
        ("frobnicate", "frobnicate", "frobnicate"),
    ],
)
def test_op_families_and_classes(op, family, cls):
    assert (op_family(op), op_class(op)) == (family, cls)


@pytest.mark.parametrize(
    ("soc", "family"),
    [
        ("NVIDIA H200", "gpu"),
        ("H100", "gpu"),
        ("Ascend910B2", "ascend"),
        ("910B4", "ascend"),
        ("something", "something"),
    ],
)
def test_platform_families(soc, family):
    assert platform_family(soc) == family


def test_a_round_0_1_more_similar_counts_e_times_as_much():
    assert weight(0.9, 0.9) == 1.0
    assert math.isclose(weight(0.9, 0.9) / weight(0.8, 0.9), math.e)
