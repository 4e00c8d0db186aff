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
overrides these. Not `'{"xla_cpu_use_fusion_emitters": false}'`: it compiles a fit's step about 30 % faster,
but XLA's CPU backend (jaxlib 0.10.2) then computes some gradients wrong: a textured render's gradient with
respect to the vertices came out 8 % off in float32 and 17 % off in float64 against central differences (the
default's agreed to 1e-9). Setting it warns (`WrongGradientOption`), and the test suite no longer sets it.

Matrix products at full float32 precision. On a TPU, JAX's default matmul precision multiplies float32
operands in bfloat16 passes: measured on a TPU v5e, the soft rasterizer's image then differed from the CPU's
by up to 0.77 at edges, a fit's loss by 18-28 %, its gradient by 14-20 % and the demo cloth's positions by
2e-3 m; at "highest" they agree with the CPU to 2e-4 or better, at the same speed (our products are of 3 x 3
and 4 x 4 matrices, never the bulk of the work). `accurate(fn)` traces `fn` under
`jax.default_matmul_precision(MATMUL_PRECISION)` unless the caller has chosen a precision
(`jax_default_matmul_precision` set, globally or in a context): `jit` applies it to every program it
compiles, and the public entry points (`gs.simulate`, `gs.render`, `gs.render_video`, ...) run their
bodies in `accurate_products()`, so a user's own `jax.jit` around them gets it too. A CPU ignores the
setting (its float32 products are always exact float32), so nothing changes there, bit for bit.

Float64 where a backend lacks it. A TPU emulates float64: elementwise work and products run (slowly: a small
cloth's rollout compiled in 38 s against 2 s on a CPU), but XLA's TPU backend has no float64 LU
decomposition or FFT (measured on a TPU v5e: `jnp.linalg.solve` raised "Only F32 and C64 types are
implemented in LuDecomposition"). The float64 sides of the diagnostics (`diagnostics.precision.at_precision`)
and the host-side float64 set-up of the physics run on the host's CPU there (`on_host`), with a warning
naming why, once (`Float64OnHost`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from typing import Callable, Iterator

import jax

#: The matmul precision gradsim-jax traces with when the caller has not chosen one (module docstring).
MATMUL_PRECISION = "highest"

#: Backends whose float64 is native (all of XLA's float64 operations, at hardware speed).
NATIVE_FLOAT64_BACKENDS = ("cpu", "gpu", "cuda", "rocm")

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


class WrongGradientOption(UserWarning):
    """An XLA option in `OPTIONS_VARIABLE` with which XLA computes some of our gradients wrong."""


#: XLA options, with the value that makes XLA's CPU backend compute some of our gradients wrong and what was
#: measured (module docstring).
WRONG_GRADIENT_OPTIONS = {
    "xla_cpu_use_fusion_emitters": (False, "a textured render's vertex gradient came out 8 % off in float32 and "
                                           "17 % off in float64 against central differences (jaxlib 0.10.2)"),
}


def warn_wrong_gradient_options(options: dict) -> None:
    """Warn (`WrongGradientOption`) for each option of `options` set to a value in `WRONG_GRADIENT_OPTIONS`.

    Args:
        options: {XLA option name: value}, as `options_from_environment` returns them.
    """
    for name, value in options.items():
        if name in WRONG_GRADIENT_OPTIONS and value == WRONG_GRADIENT_OPTIONS[name][0]:
            warnings.warn(f"{OPTIONS_VARIABLE} sets {name} = {value!r}: with it XLA computes some gradients wrong "
                          f"({WRONG_GRADIENT_OPTIONS[name][1]}); unset it", WrongGradientOption, stacklevel=2)


_ENVIRONMENT_OPTIONS = options_from_environment(os.environ.get(OPTIONS_VARIABLE))
warn_wrong_gradient_options(_ENVIRONMENT_OPTIONS)
#: The options in use: `DEFAULT_OPTIONS` with those of `OPTIONS_VARIABLE` over them.
COMPILER_OPTIONS = {**DEFAULT_OPTIONS, **_ENVIRONMENT_OPTIONS}


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
    return AccurateJit(jax.jit(fn, compiler_options=options, **kwargs))


class AccurateJit:
    """A `jax.jit` function that is traced (called, lowered, traced, shape-evaluated) in `accurate_products()`.

    The context is entered around the jitted function rather than inside `fn`, so `fn` is still called by JAX
    (no frame of this module between them); every other attribute is the jitted function's.
    """

    def __init__(self, jitted):
        self.jitted = jitted
        functools.update_wrapper(self, jitted)

    def __call__(self, *args, **kwargs):
        with accurate_products():
            return self.jitted(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """`jitted.lower(*args, **kwargs)` in `accurate_products()`.

        Args:
            *args: the arguments (or `jax.ShapeDtypeStruct`s) to lower for.
            **kwargs: keyword arguments of the function.

        Returns:
            JAX's `Lowered`.
        """
        with accurate_products():
            return self.jitted.lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        """`jitted.trace(*args, **kwargs)` in `accurate_products()`.

        Args:
            *args: the arguments to trace for.
            **kwargs: keyword arguments of the function.

        Returns:
            JAX's `Traced`.
        """
        with accurate_products():
            return self.jitted.trace(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        """`jitted.eval_shape(*args, **kwargs)` in `accurate_products()`.

        Args:
            *args: the arguments.
            **kwargs: keyword arguments of the function.

        Returns:
            the output's shapes and dtypes.
        """
        with accurate_products():
            return self.jitted.eval_shape(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.jitted, name)


def accurate(fn: Callable) -> Callable:
    """`fn` traced under `jax.default_matmul_precision(MATMUL_PRECISION)`, unless the caller chose a precision.

    The precision is read when a product is traced, so the wrapper covers every product `fn` traces, under
    any outer `jax.jit`, `grad` or `vmap`. A caller that set `jax_default_matmul_precision` (globally or with
    `jax.default_matmul_precision(...)`) keeps its own choice.

    Args:
        fn: the function to wrap.

    Returns:
        The wrapped function (same signature and docstring, `functools.wraps`).
    """

    @functools.wraps(fn)
    def traced_accurately(*args, **kwargs):
        with accurate_products():
            return fn(*args, **kwargs)

    return traced_accurately


@contextlib.contextmanager
def accurate_products() -> Iterator[None]:
    """Context in which products are traced at `MATMUL_PRECISION`, unless the caller chose a precision.

    The public entry points run their bodies in it (a context adds no frame between a warning and the
    caller's line, which a decorator would).

    Returns:
        a context manager (yields nothing).
    """
    if jax.config.jax_default_matmul_precision is not None:
        yield
    else:
        with jax.default_matmul_precision(MATMUL_PRECISION):
            yield


class Float64OnHost(UserWarning):
    """Float64 work moved to the host CPU because the default backend does not have it natively."""


_WARNED_HOST: list = []


def current_backend() -> str:
    """The backend that new computations run on: the platform of `jax.default_device` where one is set (a device
    or a platform name), else JAX's default backend.

    The library's choices per backend (stencils, one-hot rows, unrolling, float64 on the host) read it while
    tracing, so that work placed on the host CPU of an accelerator's machine gets the CPU's choices (and is
    compiled apart: the default device is part of JAX's compilation key).

    Returns:
        A backend name: "cpu", "tpu", "gpu", ...
    """
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else device.platform


def native_float64(backend: str | None = None) -> bool:
    """Whether a backend computes float64 natively (`NATIVE_FLOAT64_BACKENDS`).

    Args:
        backend: a backend name; None: the current one (`current_backend`).

    Returns:
        A Python bool.
    """
    return (backend or current_backend()) in NATIVE_FLOAT64_BACKENDS


@contextlib.contextmanager
def on_host(why: str = "") -> Iterator[None]:
    """Context in which new computations run on the host CPU when the default backend lacks native float64.

    On a CPU or GPU it does nothing. Elsewhere (a TPU) it is `jax.default_device(jax.devices("cpu")[0])`, and
    the first time it warns (`Float64OnHost`), naming `why`.

    Args:
        why: what needs float64 (for the warning), e.g. "the float64 side of a gradient check".

    Returns:
        a context manager (yields nothing).
    """
    if native_float64():
        yield
        return
    if why and not _WARNED_HOST:
        _WARNED_HOST.append(why)
        warnings.warn(f"{why} runs on the host CPU: the {current_backend()} backend emulates float64 and has no "
                      "float64 LU decomposition or FFT", Float64OnHost, stacklevel=3)
    with jax.default_device(jax.devices("cpu")[0]):
        yield
