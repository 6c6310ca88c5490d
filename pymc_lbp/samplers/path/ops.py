"""The path kernel's race and path probabilities as two pytensor Ops, one pass or two over the
sites each, with C, NUMBA and JAX implementations (and a numpy ``perform``).

:class:`PathRace` ``(site_w, exps, length) -> (path, picked, log_q, can_move)``
    the exponential race of :func:`pymc_lbp.samplers.path.reference.race` (the ``length`` sites
    of smallest ``E_i / lin_i``, ``lin = exp(site_w - top)``, ``top = max site_w`` or 0 when not
    finite; ties to the lower index), the picks' mask, the log-probability of picking them in that
    order (:func:`order_terms`) and whether ``length`` sites have positive weight. ``path[:length]``
    holds the picks in order, the other entries the other sites in an order each implementation
    chooses.
:class:`ReversePathLogProb` ``(site_w_y, path, picked, length) -> log_q``
    the log-probability of picking ``path[:length]`` in the reversed order under ``site_w_y``.

Both write the remaining mass before a pick as (mass off the path) + (suffix sums of the path),
positive terms only, as the reference does. They replace a dozen full-length array nodes of the
graph (``exp``, ``max``, ``argsort``, gathers, two ``cumsum``, switches, a scatter): on the C
backend each node of a ``scan``'s inner graph costs about a microsecond, and the race selects the
path with a heap of ``length`` entries (``O(n log R)``) instead of sorting every site. The C code
and the NUMBA loops make the same arithmetic in the same order; JAX sorts every site, as
``argsort`` did. ``tests/samplers/path/test_compiled_path_kernel.py`` holds the implementations
to the reference.

The NUMBA and JAX dispatches are registered when a kernel is built for those backends
(:func:`register_backend`), so importing this module imports neither numba nor JAX.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.link.c.op import COp


def _as_inputs(*args):
    return [pt.as_tensor_variable(a) for a in args]


def _linear(site_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log_lin, lin)``: ``site_w - top`` and its exp, ``top = max site_w`` (0 if not finite)."""
    top = float(np.max(site_w)) if site_w.size else -np.inf
    log_lin = site_w - (top if np.isfinite(top) else 0.0)
    return log_lin, np.exp(log_lin)


def order_terms(log_lin: np.ndarray, lin: np.ndarray, rest: float) -> float:
    """``sum_k [log_lin_k - log(rest + sum_{j >= k} lin_j)]``: the log-probability of picking the
    sites of ``log_lin`` in that order, ``rest`` the mass off the path (numpy, the Ops' math)."""
    if not lin.size:
        return 0.0
    remaining = rest + np.cumsum(lin[::-1])[::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sum(log_lin - np.log(remaining)))


_SUPPORT = r"""
#ifndef PAS_PATH_SUPPORT
#define PAS_PATH_SUPPORT
static inline int pas_less(double ka, npy_int64 ia, double kb, npy_int64 ib) {
    return ka < kb || (ka == kb && ia < ib);
}
/* sift-down in a max-heap of (key, index) pairs */
static void pas_sift(npy_int64* h, double* hk, npy_intp size, npy_intp pos) {
    npy_int64 i = h[pos];
    double k = hk[pos];
    for (;;) {
        npy_intp c = 2 * pos + 1;
        if (c >= size) break;
        if (c + 1 < size && pas_less(hk[c], h[c], hk[c + 1], h[c + 1])) c++;
        if (!pas_less(k, i, hk[c], h[c])) break;
        h[pos] = h[c];
        hk[pos] = hk[c];
        pos = c;
    }
    h[pos] = i;
    hk[pos] = k;
}
/* (re)allocate a C-contiguous output of rank 0 or 1 */
static int pas_output(PyArrayObject** out, int nd, npy_intp n, int typenum) {
    npy_intp dims[1] = {n};
    if (*out && PyArray_NDIM(*out) == nd && (nd == 0 || PyArray_DIM(*out, 0) == n)
        && PyArray_TYPE(*out) == typenum && PyArray_IS_C_CONTIGUOUS(*out))
        return 0;
    Py_XDECREF(*out);
    *out = (PyArrayObject*)PyArray_EMPTY(nd, dims, typenum, 0);
    return *out ? 0 : -1;
}
/* max of w, 0 when not finite (no site can move) */
static double pas_top(const double* w, npy_intp n) {
    double top = -NPY_INFINITY;
    for (npy_intp i = 0; i < n; i++) top = w[i] > top ? w[i] : top;
    return (top < NPY_INFINITY && top > -NPY_INFINITY) ? top : 0.0;
}
/* lin = exp(w - top) */
static void pas_exp(const double* w, double top, double* lin, npy_intp n) {
    for (npy_intp i = 0; i < n; i++) lin[i] = exp(w[i] - top);
}
/* sum of lin where not picked (four partial sums) */
static double pas_rest(const double* lin, const npy_bool* picked, npy_intp n) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    npy_intp i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += picked[i + j] ? 0.0 : lin[i + j];
    for (; i < n; i++) s[0] += picked[i] ? 0.0 : lin[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}
#define PAS_AT(arr, i, T) (*(T*)(PyArray_BYTES(arr) + (i) * PyArray_STRIDE(arr, 0)))
static npy_intp pas_length(PyArrayObject* length, npy_intp n) {
    npy_int64 r = *(npy_int64*)PyArray_DATA(length);
    return r < 0 ? 0 : (r > n ? n : (npy_intp)r);
}
#endif
"""


class _PathOp(COp):
    """What the two Ops share: no props, the C support code and its cache version."""

    __props__ = ()

    def c_support_code(self, **kwargs):
        return _SUPPORT

    def c_code_cache_version(self):
        return (4,)


class PathRace(_PathOp):
    """``(site_w, exps, length) -> (path, picked, log_q, can_move)``: see the module docs."""

    def make_node(self, site_w, exps, length):
        site_w, exps, length = _as_inputs(site_w, exps, length)
        site_w = pt.cast(site_w, "float64")
        exps = pt.cast(exps, "float64")
        length = pt.cast(length, "int64")
        shape = site_w.type.shape
        outputs = [
            pt.tensor(dtype="int64", shape=shape),
            pt.tensor(dtype="bool", shape=shape),
            pt.scalar(dtype="float64"),
            pt.scalar(dtype="bool"),
        ]
        return Apply(self, [site_w, exps, length], outputs)

    def perform(self, node, inputs, output_storage):
        site_w, exps, length = inputs
        n = site_w.shape[0]
        size = min(max(int(length), 0), n)
        log_lin, lin = _linear(site_w)
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = exps / lin
        order = np.argsort(keys, kind="stable").astype(np.int64)
        path = order[:size]
        picked = np.zeros(n, dtype=bool)
        picked[path] = True
        rest = float(np.sum(lin[~picked]))
        log_q = order_terms(log_lin[path], lin[path], rest)
        output_storage[0][0] = order
        output_storage[1][0] = picked
        output_storage[2][0] = np.asarray(log_q, dtype=np.float64)
        output_storage[3][0] = np.asarray(np.count_nonzero(lin > 0) >= size)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0], input_shapes[0], (), ()]

    def c_headers(self, **kwargs):
        return ["<math.h>", "<stdlib.h>", "<string.h>"]

    def c_code(self, node, name, inputs, outputs, sub):
        w, e, length = inputs
        path, picked, log_q, can = outputs
        fail = sub["fail"]
        return f"""
{{
    npy_intp n = PyArray_DIM({w}, 0);
    npy_intp R = pas_length({length}, n);
    if (pas_output(&{path}, 1, n, NPY_INT64) || pas_output(&{picked}, 1, n, NPY_BOOL)
        || pas_output(&{log_q}, 0, 0, NPY_FLOAT64) || pas_output(&{can}, 0, 0, NPY_BOOL)) {{
        {fail}
    }}
    npy_int64* p = (npy_int64*)PyArray_DATA({path});
    npy_bool* m = (npy_bool*)PyArray_DATA({picked});
    PyArrayObject* wc = PyArray_GETCONTIGUOUS({w});
    PyArrayObject* ec = PyArray_GETCONTIGUOUS({e});
    double* lin = (double*)malloc((n > 0 ? n : 1) * sizeof(double));
    double* hk = (double*)malloc((R > 0 ? R : 1) * sizeof(double));
    if (!wc || !ec || !lin || !hk) {{
        Py_XDECREF(wc); Py_XDECREF(ec); free(lin); free(hk);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        {fail}
    }}
    const double* W = (const double*)PyArray_DATA(wc);
    const double* E = (const double*)PyArray_DATA(ec);
    double top = pas_top(W, n);
    pas_exp(W, top, lin, n);
    npy_intp movable = 0;
    for (npy_intp i = 0; i < n; i++) movable += lin[i] > 0;
    /* the R smallest keys E_i / lin_i (ties to the lower index): a max-heap of R entries */
    if (R > 0) {{
        for (npy_intp i = 0; i < R; i++) {{
            p[i] = i;
            hk[i] = E[i] / lin[i];
        }}
        for (npy_intp i = R / 2; i-- > 0;) pas_sift(p, hk, R, i);
        for (npy_intp i = R; i < n; i++) {{
            double k = E[i] / lin[i];
            if (pas_less(k, i, hk[0], p[0])) {{
                p[0] = i;
                hk[0] = k;
                pas_sift(p, hk, R, 0);
            }}
        }}
        for (npy_intp end = R - 1; end > 0; end--) {{ /* heap sort: increasing keys */
            npy_int64 ti = p[0]; double tk = hk[0];
            p[0] = p[end]; hk[0] = hk[end];
            p[end] = ti; hk[end] = tk;
            pas_sift(p, hk, end, 0);
        }}
    }}
    memset(m, 0, n * sizeof(npy_bool));
    for (npy_intp k = 0; k < R; k++) m[p[k]] = 1;
    double rest = pas_rest(lin, m, n);
    npy_intp pos = R;
    for (npy_intp i = 0; i < n; i++) if (!m[i]) p[pos++] = i;
    double suffix = 0.0, lq = 0.0;
    for (npy_intp k = R; k-- > 0;) {{
        npy_int64 s = p[k];
        suffix += lin[s];
        lq += (W[s] - top) - log(rest + suffix);
    }}
    free(lin);
    free(hk);
    Py_DECREF(wc);
    Py_DECREF(ec);
    *(double*)PyArray_DATA({log_q}) = lq;
    *(npy_bool*)PyArray_DATA({can}) = movable >= R;
}}
"""


class ReversePathLogProb(_PathOp):
    """``(site_w, path, picked, length) -> log_q``: the log-probability under ``site_w`` of
    picking ``path[:length]`` in the reversed order (``picked`` its mask); see the module docs."""

    def make_node(self, site_w, path, picked, length):
        site_w, path, picked, length = _as_inputs(site_w, path, picked, length)
        site_w = pt.cast(site_w, "float64")
        path = pt.cast(path, "int64")
        picked = pt.cast(picked, "bool")
        length = pt.cast(length, "int64")
        return Apply(self, [site_w, path, picked, length], [pt.scalar(dtype="float64")])

    def perform(self, node, inputs, output_storage):
        site_w, path, picked, length = inputs
        size = min(max(int(length), 0), site_w.shape[0])
        log_lin, lin = _linear(site_w)
        back = path[:size][::-1]
        log_q = order_terms(log_lin[back], lin[back], float(np.sum(lin[~picked])))
        output_storage[0][0] = np.asarray(log_q, dtype=np.float64)

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def c_headers(self, **kwargs):
        return ["<math.h>", "<stdlib.h>"]

    def c_code(self, node, name, inputs, outputs, sub):
        w, path, picked, length = inputs
        (log_q,) = outputs
        fail = sub["fail"]
        return f"""
{{
    npy_intp n = PyArray_DIM({w}, 0);
    npy_intp R = pas_length({length}, n);
    if (pas_output(&{log_q}, 0, 0, NPY_FLOAT64)) {{
        {fail}
    }}
    PyArrayObject* wc = PyArray_GETCONTIGUOUS({w});
    PyArrayObject* mc = PyArray_GETCONTIGUOUS({picked});
    double* lin = (double*)malloc((n > 0 ? n : 1) * sizeof(double));
    if (!wc || !mc || !lin) {{
        Py_XDECREF(wc); Py_XDECREF(mc); free(lin);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        {fail}
    }}
    const double* W = (const double*)PyArray_DATA(wc);
    double top = pas_top(W, n);
    pas_exp(W, top, lin, n);
    double rest = pas_rest(lin, (const npy_bool*)PyArray_DATA(mc), n);
    /* reversed order: the mass left before the pick of path[k] is rest + path[0..k] */
    double suffix = 0.0, lq = 0.0;
    for (npy_intp k = 0; k < R; k++) {{
        npy_int64 s = PAS_AT({path}, k, npy_int64);
        suffix += lin[s];
        lq += (W[s] - top) - log(rest + suffix);
    }}
    free(lin);
    Py_DECREF(wc);
    Py_DECREF(mc);
    *(double*)PyArray_DATA({log_q}) = lq;
}}
"""


# -- NUMBA and JAX ---------------------------------------------------------------------------------

_REGISTERED: set[str] = set()
NUMBA_VERSION = 2
"""Salt of the NUMBA implementations' cache key (PyTensor keys them by the Op's type and props):
bump it when they change."""


def register_backend(backend: str) -> None:
    """Register the NUMBA (``"numba"``) or JAX (``"jax"``) implementations of the Ops (once;
    imports that backend's pytensor dispatch)."""
    if backend in _REGISTERED:
        return
    if backend == "numba":
        _register_numba()
    elif backend == "jax":
        _register_jax()
    else:
        raise ValueError(f"unknown backend {backend!r}")
    _REGISTERED.add(backend)


def _register_numba() -> None:
    from pytensor.link.numba.dispatch import basic as numba_basic
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    def njit(fn):  # float division by zero gives inf, as in numpy and C
        return numba_basic.numba_njit(fn, error_model="numpy")

    @njit
    def less(ka, ia, kb, ib):
        return ka < kb or (ka == kb and ia < ib)

    @njit
    def sift(h, hk, size, pos):
        i = h[pos]
        k = hk[pos]
        while True:
            c = 2 * pos + 1
            if c >= size:
                break
            if c + 1 < size and less(hk[c], h[c], hk[c + 1], h[c + 1]):
                c += 1
            if not less(k, i, hk[c], h[c]):
                break
            h[pos] = h[c]
            hk[pos] = hk[c]
            pos = c
        h[pos] = i
        hk[pos] = k

    @njit
    def top_of(w):
        top = -np.inf
        for i in range(w.shape[0]):
            if w[i] > top:
                top = w[i]
        return top if np.isfinite(top) else 0.0

    @njit
    def clip_length(length, n):
        r = length.item()
        return 0 if r < 0 else (n if r > n else r)

    @register_funcify_default_op_cache_key(PathRace)
    def numba_funcify_PathRace(op, node=None, **kwargs):
        @njit
        def path_race(w, e, length):
            n = w.shape[0]
            size = clip_length(length, n)
            p = np.empty(n, dtype=np.int64)
            m = np.zeros(n, dtype=np.bool_)
            lin = np.empty(n, dtype=np.float64)
            hk = np.empty(max(size, 1), dtype=np.float64)
            top = top_of(w)
            movable = 0
            for i in range(n):
                lin[i] = np.exp(w[i] - top)
                movable += lin[i] > 0
            if size > 0:
                for i in range(size):
                    p[i] = i
                    hk[i] = e[i] / lin[i]
                for i in range(size // 2 - 1, -1, -1):
                    sift(p, hk, size, i)
                for i in range(size, n):
                    k = e[i] / lin[i]
                    if less(k, i, hk[0], p[0]):
                        p[0] = i
                        hk[0] = k
                        sift(p, hk, size, 0)
                for end in range(size - 1, 0, -1):
                    ti, tk = p[0], hk[0]
                    p[0], hk[0] = p[end], hk[end]
                    p[end], hk[end] = ti, tk
                    sift(p, hk, end, 0)
            for k in range(size):
                m[p[k]] = True
            rest = 0.0
            pos = size
            for i in range(n):
                if not m[i]:
                    rest += lin[i]
                    p[pos] = i
                    pos += 1
            suffix = 0.0
            lq = 0.0
            for k in range(size - 1, -1, -1):
                s = p[k]
                suffix += lin[s]
                lq += (w[s] - top) - np.log(rest + suffix)
            return p, m, np.array(lq), np.array(movable >= size)

        return path_race, NUMBA_VERSION

    @register_funcify_default_op_cache_key(ReversePathLogProb)
    def numba_funcify_ReversePathLogProb(op, node=None, **kwargs):
        @njit
        def reverse_log_prob(w, path, picked, length):
            n = w.shape[0]
            size = clip_length(length, n)
            top = top_of(w)
            rest = 0.0
            for i in range(n):
                if not picked[i]:
                    rest += np.exp(w[i] - top)
            suffix = 0.0
            lq = 0.0
            for k in range(size):
                lw = w[path[k]] - top
                suffix += np.exp(lw)
                lq += lw - np.log(rest + suffix)
            return np.array(lq)

        return reverse_log_prob, NUMBA_VERSION


def _register_jax() -> None:
    import jax.numpy as jnp
    from pytensor.link.jax.dispatch import jax_funcify

    def linear(w):
        top = jnp.max(w)
        log_lin = w - jnp.where(jnp.isfinite(top), top, 0.0)
        return log_lin, jnp.exp(log_lin)

    def log_prob(log_lin, lin, order, on_path, rest, reverse):
        picks = jnp.where(on_path, lin[order], 0.0)
        if reverse:  # the picks of order[:length] in the reversed order
            remaining = rest + jnp.cumsum(picks)
        else:
            remaining = rest + jnp.cumsum(picks[::-1])[::-1]
        return jnp.sum(jnp.where(on_path, log_lin[order] - jnp.log(remaining), 0.0))

    @jax_funcify.register(PathRace)
    def jax_funcify_PathRace(op, **kwargs):
        def path_race(w, e, length):
            log_lin, lin = linear(w)
            order = jnp.argsort(e / lin, stable=True).astype(jnp.int64)
            on_path = jnp.arange(w.shape[0]) < length
            picked = jnp.zeros(w.shape[0], dtype=bool).at[order].set(on_path)
            rest = jnp.sum(jnp.where(picked, 0.0, lin))
            log_q = log_prob(log_lin, lin, order, on_path, rest, reverse=False)
            return order, picked, log_q, jnp.sum(lin > 0) >= length

        return path_race

    @jax_funcify.register(ReversePathLogProb)
    def jax_funcify_ReversePathLogProb(op, **kwargs):
        def reverse_log_prob(w, path, picked, length):
            log_lin, lin = linear(w)
            on_path = jnp.arange(w.shape[0]) < length
            rest = jnp.sum(jnp.where(picked, 0.0, lin))
            return log_prob(log_lin, lin, path, on_path, rest, reverse=True)

        return reverse_log_prob


__all__ = ["PathRace", "ReversePathLogProb", "order_terms", "register_backend"]
