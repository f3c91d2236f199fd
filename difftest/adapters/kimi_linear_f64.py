"""A float64 copy of transformers' Kimi Linear modeling code, for float64 checks.

transformers 5.23's `modeling_kimi_linear.py` computes its norms, forget gate, router and KDA
kernels in float32 whatever the input dtype (`.to(torch.float32)`, `.float()`), so a float64
model is float32 inside and cannot be compared at float64 tolerances. `module()` returns the same
source executed with exactly these textual edits, and nothing else:
* `torch.float32` -> `torch.float64` and `.float()` -> `.double()` (every cast);
* the `@use_kernel_func_from_hub_with_fallback(...)`, `@use_kernel_forward_from_hub(...)` and
  `@use_kernelized_func([...])` decorators removed, so the torch code itself runs (with fla
  installed the decorated names dispatch to fla's Triton kernels; the existing `kda_recurrence`
  adapters take `__wrapped__` for the same reason).
The copy's classes are distinct from transformers' registered ones; their state dicts are the same.
`EDITS` counts the edits, and `tests/test_kimi_linear.py` checks the count, so a new transformers
version with new casts fails loudly instead of silently staying float32.
"""

from __future__ import annotations

import re
import sys
import types
from functools import cache

NAME = "transformers.models.kimi_linear.modeling_kimi_linear_f64"
DECORATORS = re.compile(r"^@use_kernel_func_from_hub_with_fallback\(.*\)\n|^@use_kernel_forward_from_hub\(.*\)\n"
                        r"|^@use_kernelized_func\(\s*\[[^\]]*\]\s*\)\n", re.MULTILINE)
#: edits expected in transformers 5.23.0's file: (torch.float32, .float(), decorators)
EDITS = (10, 4, 7)


def edited_source(float64: bool = True) -> tuple[str, tuple[int, int, int]]:
    """The float64 source and the number of each kind of edit (`float64` False: the decorators
    removed only, transformers' own float32 computation)."""
    from transformers.models.kimi_linear import modeling_kimi_linear

    with open(modeling_kimi_linear.__file__, encoding="utf-8") as f:
        src = f.read()
    counts = (src.count("torch.float32"), src.count(".float()"), len(DECORATORS.findall(src)))
    src = DECORATORS.sub("", src)
    if float64:
        src = src.replace("torch.float32", "torch.float64").replace(".float()", ".double()")
    return src, counts


@cache
def module(extra: tuple[tuple[str, str], ...] = (), float64: bool = True) -> types.ModuleType:
    """The float64 copy, imported once (as `NAME`, in transformers' kimi_linear package);
    `extra`: further (old, new) source replacements, each of which must occur (planted bugs in
    tests), giving a separate module."""
    from transformers.models.kimi_linear import modeling_kimi_linear

    src, _ = edited_source(float64)
    for old, new in extra:
        if old not in src:
            raise ValueError(f"{old!r} does not occur in {modeling_kimi_linear.__file__}")
        src = src.replace(old, new)
    name = NAME + (f"_planted{abs(hash(extra))}" if extra else "") + ("" if float64 else "_f32")
    mod = types.ModuleType(name)
    mod.__package__ = "transformers.models.kimi_linear"
    mod.__file__ = modeling_kimi_linear.__file__
    sys.modules[name] = mod
    exec(compile(src, f"{modeling_kimi_linear.__file__} (float64 copy)", "exec"), mod.__dict__)
    return mod
