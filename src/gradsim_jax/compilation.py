"""How gradsim-jax compiles: `jax.jit` with the XLA options our programs run best with.

`jit(fn, **kwargs)` is `jax.jit(fn, compiler_options=COMPILER_OPTIONS, **kwargs)`; the fit loop, the system
identification, the diagnostics, the command line and the benchmarks compile through it, and a user's own
`jax.jit` around `gs.simulate` gets the same speed with `gs.jit`.

Why: XLA's CPU backend (jaxlib 0.10) hands reductions to YNNPACK fusions by default. Our force kernels sum
over short axes (a dot of 3-vectors, the corners of a triangle) of arrays with tens of thousands of rows,
where those fusions are an order of magnitude slower than XLA's own loops: `jnp.sum(a * b, 0)` of two [3,
32768] arrays took 0.34 ms, the same sum written as three adds 0.02 ms. Turning the YNNPACK fusions off
(`xla_cpu_experimental_ynn_fusion_type=""`) made, on the 2-core CPU of the README, a 128 x 128 cloth's
step 1.8 -> 1.1 ms and its gradient 8.2 -> 4.7 ms a step; the small demo cloth (233 particles) runs the
same either way, and compile times do not change. Other backends ignore the option (it is a CPU debug
option of XLA's shared option set).

`GRADSIM_JAX_COMPILER_OPTIONS`, a JSON object in the environment (read at import), adds options or
overrides these. `'{"xla_cpu_use_fusion_emitters": false}'` compiles a fit's step about 30 % faster and
runs it 10-25 % slower on the CPU (measured on the README's machine): worth it where compiling is most of
the time, as in the test suite, which sets it; the library's default keeps XLA's own.
"""

from __future__ import annotations

import json
import os
from typing import Callable

import jax

#: The environment variable with extra XLA options (a JSON object), merged over `DEFAULT_OPTIONS`.
OPTIONS_VARIABLE = "GRADSIM_JAX_COMPILER_OPTIONS"
#: XLA options of every program gradsim-jax compiles (see the module docstring).
DEFAULT_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}


def options_from_environment(text) -> dict:
    """The options that `text` (the value of `OPTIONS_VARIABLE`, None or empty for none) adds; ValueError
    when it is not a JSON object of option names to strings, numbers or booleans.

    Args:
        text: the JSON text of `OPTIONS_VARIABLE` ('{"xla_cpu_use_fusion_emitters": false}'), or None or ""
            for none.

    Returns:
        {XLA option name: value}, empty when `text` is None or empty.
    """
    if not text:
        return {}
    try:
        extra = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{OPTIONS_VARIABLE} must be a JSON object of XLA options; got {text!r} ({e})") from None
    if not isinstance(extra, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in extra.items()):
        raise ValueError(f"{OPTIONS_VARIABLE} must be a JSON object {{option: string, number or boolean}}; got "
                         f"{text!r}")
    return extra


#: The options in use: `DEFAULT_OPTIONS` with those of `OPTIONS_VARIABLE` over them.
COMPILER_OPTIONS = {**DEFAULT_OPTIONS, **options_from_environment(os.environ.get(OPTIONS_VARIABLE))}


def jit(fn: Callable, **kwargs) -> Callable:
    """`jax.jit(fn, **kwargs)` compiled with `COMPILER_OPTIONS` (merged under any `compiler_options` given).

    Args:
        fn: the function to compile.
        **kwargs: any arguments of `jax.jit` (static_argnums, donate_argnums, ...); a `compiler_options` dict
            among them overrides `COMPILER_OPTIONS` option by option.

    Returns:
        The compiled function, as `jax.jit` returns it.
    """
    options = {**COMPILER_OPTIONS, **(kwargs.pop("compiler_options", None) or {})}
    return jax.jit(fn, compiler_options=options, **kwargs)
