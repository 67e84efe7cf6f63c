"""Kernel names: one normalised spelling per kernel, and the kind a name belongs to.

The three tools spell one kernel differently: nsys prints the full demangled name
(`void cutlass::Kernel2<cutlass_80_tensorop_...>(T1::Params)`), ncu a shortened one with namespaces and
parameter types dropped (`void Kernel2<cutlass_80_tensorop_...>(Params)`), Kineto the demangled name of
the runtime. `normalise` keeps what all of them agree on: the function name with its template
arguments, without return type, namespaces, parameter list and `(int)`-style casts.

`kind_of` maps a name to one of KINDS by the first matching pattern of RULES (data, in order: a CUTLASS
GEMM with a ReLU epilogue is a gemm, a copy written as an elementwise functor is a copy).
NB: names that say nothing about their work (nvFuser's `nvfuser_none_f0_c0_r0_g0`, TensorRT's Myelin
`__myl_*` fusions) are `other`: the join to the estimate then goes by order and shape, not kind.
"""

from __future__ import annotations

import re
from functools import lru_cache

KINDS = ("gemm", "attention", "norm", "elementwise", "reduction", "copy", "communication", "other")

# (kind, pattern) in lookup order; patterns are matched case-insensitively against the normalised name.
RULES: tuple[tuple[str, str], ...] = (
    (
        "communication",
        r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|cross_device"
        r"|sendrecv|nvshmem",
    ),
    ("attention", r"flash|fmha|attention|attn|\bmha|sdpa|xformers|paged_kv|decode_kv"),
    (
        "gemm",
        r"gemm|gemv|nvjet|xmma|cutlass|wgmma|hgmma|matmul|cublas|s16816|s161616|tensorop"
        r"|triton_tem_|triton_.*mm|\bbmm|implicit_gemm|fprop|dgrad|wgrad|conv",
    ),
    ("norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|softmax|norm_kernel"),
    (
        "reduction",
        r"reduce|reduction|triton_red_|triton_per_|argmax|argmin|topk|cub::|sum_kernel|scan_kernel",
    ),
    (
        "copy",
        r"copy|memcpy|transpose|permute|catarray|cat_kernel|gather|scatter|index_select|indexing"
        r"|embedding|concat|split_kernel|pad_kernel",
    ),
    (
        "elementwise",
        r"elementwise|functor|triton_poi_|pointwise|fill|activation|gelu|silu|swiglu|relu"
        r"|sigmoid|tanh|\badd|\bmul|rotary|rope|dropout|cast|quant",
    ),
)
_COMPILED = tuple((kind, re.compile(p, re.IGNORECASE)) for kind, p in RULES)
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|bool|long|char|short|unsigned)(?: long)*\)")
_NAMESPACE = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|[A-Za-z_]\w*)::")


def _strip_params(name: str) -> str:
    """Drop the trailing parameter list `(...)` (balanced), if the name ends with one."""
    name = name.strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                head = name[:i].rstrip()
                # `(anonymous namespace)` or a cast is part of the name, not a parameter list
                return head if head and not head.endswith(("::", "<", ",")) else name
    return name


def _last_top_level_token(name: str) -> str:
    """The text after the last space outside <...>: drops `void ` and other return types."""
    depth, cut = 0, 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0:
            cut = i + 1
    return name[cut:]


@lru_cache(maxsize=65536)
def normalise(name: str) -> str:
    """The tool-independent spelling of a kernel name (see the module docstring)."""
    text = _CAST.sub("", name.replace("(anonymous namespace)", "<unnamed>"))
    text = _strip_params(text)
    text = _last_top_level_token(text) or text
    text = _NAMESPACE.sub("", text)
    return re.sub(r"\s+", " ", text).strip() or name.strip()


@lru_cache(maxsize=65536)
def kind_of(name: str) -> str:
    """The kind (one of KINDS) of a kernel name: the first RULES pattern found in the name with its
    namespaces (`internal::gemvx::kernel<...>` is a gemv) but without its parameter list."""
    text = _strip_params(name)
    for kind, pattern in _COMPILED:
        if pattern.search(text):
            return kind
    return "other"
