"""Chain motifs: blocks of consecutive categorical states of a chain (HMMs, chain CRFs).

The chain motif of Wang et al. (2018)'s tagging experiment: a block of ``L`` consecutive
categorical variables ``z_s .. z_{s+L-1}`` (``K`` categories each) of a model whose log density,
as a function of the chain with everything else fixed, is a sum of unary terms and of pairwise
terms between consecutive states (an HMM's transitions and emissions, a chain CRF's potentials).
Given the rest of the state, the block's conditional is then a chain of its own,

    log p(z_B | rest) = sum_i a_i(z_i) + sum_i b_i(z_i, z_{i+1}) + const,

where the block's Markov blanket (``z_{s-1}`` and ``z_{s+L}``) enters through the first and last
unary terms. The motif's local parameters are these log-potentials in a canonical form
(:func:`canonical_chain_params`), so the motif has no conditioning variables
(:func:`chain_motif`).

**The potentials from the model** (:func:`chain_reference_states`,
:func:`chain_potentials_from_reference`): the model logp at the *reference* state (the block set
to category 0, the rest as it is), at every one-site change of it and at every change of two
consecutive sites gives, by inclusion-exclusion, ``a_i(k) = F(r_i^k) - F(r)`` and
``b_i(k, k') = F(r_{i,i+1}^{k,k'}) - F(r_i^k) - F(r_{i+1}^{k'}) + F(r)`` in one batched call,
exact when the model is chain-structured in the block. They never depend on the block's current
values, so a proposal built from them is an independence proposal for the block and the MH
correction against the model's own logp keeps the sampler exact whatever the structure or the
network (an impossible transition, ``-inf``, is only a very unlikely one to the network).

Training data: :func:`chain_motif_samples`, with exact block conditionals by enumeration
(:func:`chain_motif_log_conditional`).
"""

from __future__ import annotations

import functools

import numpy as np

from pymc_lbp.samplers.block.motifs.lattice_blocks import _starts
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec
from pymc_lbp.samplers.common import inverse_cdf

CLIP = 20.0
"""Canonical log-potentials are clipped to ``[-CLIP, CLIP]`` for the network's input."""

BIG = 4 * CLIP
"""Non-finite log-potentials (impossible states) count as ``-BIG`` (``+BIG`` for ``+inf``)
before the canonical form is taken."""

CHAIN_PARAMS_FROM = "chain"
"""``BlockSet.params_from`` of chain blocks: the step computes each block's parameters from the
model at every update (:func:`chain_reference_states`)."""


def chain_motif(n_categories: int, length: int) -> MotifSpec:
    """The chain motif ``chain-k{K}-b{L}``: ``L`` consecutive ``K``-category states, no
    conditioning variables, ``L K + (L - 1) K^2`` canonical log-potentials."""
    K, L = int(n_categories), int(length)
    if K < 2:
        raise ValueError(f"a chain motif needs at least 2 categories, got {K}")
    if not 2 <= L <= 6:
        raise ValueError(f"chain motif blocks have 2 to 6 states, got {L}")
    return MotifSpec(
        f"chain-k{K}-b{L}",
        (K,) * L,
        (),
        L * K + (L - 1) * K * K,
        f"{L} consecutive {K}-category states of a chain; parameters: the block's canonical unary "
        f"log-potentials a[i, k] ({L} x {K}, the Markov blanket absorbed) then pairwise "
        f"b[i, k, k'] ({L - 1} x {K} x {K}), double-centred, clipped to +-{CLIP:g} "
        "(pymc_lbp.samplers.block.motifs.chain)",
    )


def chain_shape(motif: MotifSpec) -> tuple[int, int]:
    """``(K, L)`` of a chain motif (raises for other motifs)."""
    L = motif.block_size
    K = motif.block_cards[0]
    if (
        motif.cond_size
        or len(set(motif.block_cards)) != 1
        or motif.n_params != L * K + (L - 1) * K * K
    ):
        raise ValueError(f"motif {motif.name!r} is not a chain motif")
    return K, L


@functools.cache
def chain_reference_states(n_categories: int, length: int) -> np.ndarray:
    """Block states the potentials are read from: the reference (all 0), every one-site change
    ``(i, k)``, ``k >= 1``, in order, then every change of two consecutive sites
    ``(i, k, k')``, ``k, k' >= 1``; shape ``(1 + L (K-1) + (L-1)(K-1)^2, L)``, read-only."""
    K, L = int(n_categories), int(length)
    eye = np.eye(L, dtype=np.int64)
    singles = [k * eye[i] for i in range(L) for k in range(1, K)]
    pairs = [
        k * eye[i] + k2 * eye[i + 1]
        for i in range(L - 1)
        for k in range(1, K)
        for k2 in range(1, K)
    ]
    out = np.stack([np.zeros(L, np.int64), *singles, *pairs])
    out.setflags(write=False)
    return out


def chain_potentials_from_reference(
    logp: np.ndarray, n_categories: int, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Unary ``a (..., L, K)`` and pairwise ``b (..., L-1, K, K)`` log-potentials from the logp
    at :func:`chain_reference_states` (last axis; any constant offset cancels).

    ``a[i, 0] = 0`` and ``b[i, 0, :] = b[i, :, 0] = 0``: the decomposition relative to the
    reference, exact for chain-structured logps. Non-finite values stay as they are (``-inf``:
    impossible).
    """
    K, L = int(n_categories), int(length)
    logp = np.asarray(logp, dtype=np.float64)
    lead = logp.shape[:-1]
    f0 = logp[..., 0, None, None]
    single = logp[..., 1 : 1 + L * (K - 1)].reshape(*lead, L, K - 1)
    pair = logp[..., 1 + L * (K - 1) :].reshape(*lead, L - 1, K - 1, K - 1)
    a = np.zeros((*lead, L, K))
    b = np.zeros((*lead, L - 1, K, K))
    with np.errstate(invalid="ignore"):
        a[..., 1:] = single - f0
        b[..., 1:, 1:] = pair - single[..., :-1, :, None] - single[..., 1:, None, :] + f0[..., None]
    b[np.isnan(b)] = -np.inf  # an impossible pair whose single changes are impossible too
    return a, b


def canonical_chain_params(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The motif's parameter vector(s) from unary ``a (..., L, K)`` and pairwise
    ``b (..., L-1, K, K)`` log-potentials: pairwise double-centred (row and column means moved
    to the unaries), unaries centred, then all clipped to ``[-CLIP, CLIP]`` (non-finite entries
    are first set to ``-+BIG``, so the centring is defined). Shape ``(..., L K + (L-1) K^2)``."""
    a = np.nan_to_num(np.asarray(a, dtype=np.float64), nan=-BIG, neginf=-BIG, posinf=BIG)
    b = np.nan_to_num(np.asarray(b, dtype=np.float64), nan=-BIG, neginf=-BIG, posinf=BIG)
    rows = b.mean(axis=-1, keepdims=True)
    cols = b.mean(axis=-2, keepdims=True)
    mean = b.mean(axis=(-2, -1), keepdims=True)
    a[..., :-1, :] += rows[..., 0] - mean[..., 0]
    a[..., 1:, :] += cols[..., 0, :]
    b = b - rows - cols + mean
    a = a - a.mean(axis=-1, keepdims=True)
    lead = a.shape[:-2]
    flat = np.concatenate([a.reshape(*lead, -1), b.reshape(*lead, -1)], axis=-1)
    return np.clip(flat, -CLIP, CLIP)


def split_chain_params(params: np.ndarray, n_categories: int, length: int):
    """Inverse of the concatenation in :func:`canonical_chain_params`: ``(a, b)``."""
    K, L = int(n_categories), int(length)
    params = np.asarray(params, dtype=np.float64)
    lead = params.shape[:-1]
    a = params[..., : L * K].reshape(*lead, L, K)
    b = params[..., L * K :].reshape(*lead, L - 1, K, K)
    return a, b


def chain_block_states(n_categories: int, length: int) -> np.ndarray:
    """Every joint state of the block, row ``j`` the base-``K`` digits of ``j`` (first site
    most significant); shape ``(K^L, L)``."""
    return np.array(list(np.ndindex((int(n_categories),) * int(length))), dtype=np.int64)


def chain_log_potential(params: np.ndarray, states: np.ndarray, n_categories: int) -> np.ndarray:
    """``sum_i a_i(z_i) + sum_i b_i(z_i, z_{i+1})`` of the canonical ``params`` (n, P) at block
    ``states`` (S, L); shape (n, S)."""
    L = states.shape[1]
    a, b = split_chain_params(np.atleast_2d(params), n_categories, L)
    out = np.zeros((a.shape[0], states.shape[0]))
    for i in range(L):
        out += a[:, i, states[:, i]]
    for i in range(L - 1):
        out += b[:, i, states[:, i], states[:, i + 1]]
    return out


def chain_motif_log_conditional(params: np.ndarray, n_categories: int, length: int) -> np.ndarray:
    """Exact ``log p(z_B | rest)`` of the motif's parameters over all ``K^L`` block states
    (:func:`chain_block_states` order); shape (n, K^L)."""
    lp = chain_log_potential(params, chain_block_states(n_categories, length), n_categories)
    top = lp.max(axis=1, keepdims=True)
    return lp - top - np.log(np.exp(lp - top).sum(axis=1, keepdims=True))


def chain_motif_samples(
    n: int,
    rng: np.random.Generator | int | None = None,
    *,
    n_categories: int,
    length: int,
    edge_prob: float = 0.25,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint samples of the chain motif over random chain potentials (training data).

    The training distribution, meant to cover the blocks of HMMs and chain CRFs:

    * transitions: a ``K x K`` matrix shared by the block w.p. 1/2 (an HMM), else one per
      position (a CRF); each row Dirichlet(1/2) w.p. 1/2, else *sticky* (stay probability
      Beta(4, 1), the rest Dirichlet(1) over the other categories); the pairwise log-potential
      is the log of the matrix;
    * the blanket: each end of the block lies on the end of the chain w.p. ``edge_prob`` (no
      outside neighbour); otherwise the outside neighbour's category is uniform and its
      transition row (or column) is added to the end's unary term;
    * emissions: unary log-potentials ``s * N(0, 1)`` per site and category, with one scale
      per motif, ``s`` log-uniform on [0.1, 10] (weak to decisive evidence).

    The block is then drawn from its exact conditional (enumeration of the ``K^L`` states).

    Returns
    -------
    x_block : ndarray of int, shape (n, L)
    x_cond : ndarray of int, shape (n, 0)
    params : ndarray, shape (n, L K + (L-1) K^2)
    """
    rng = np.random.default_rng(rng)
    K, L = int(n_categories), int(length)

    def transition_rows(size):
        dense = rng.dirichlet(np.full(K, 0.5), size=size)
        stay = rng.beta(4.0, 1.0, size=size[:-1] + (K,))
        other = rng.dirichlet(np.ones(K - 1), size=size) if K > 2 else np.ones(size + (1,))
        sticky = np.zeros(size + (K,))
        sticky[..., ~np.eye(K, dtype=bool)] = ((1 - stay[..., None]) * other).reshape(
            *size[:-1], -1
        )
        sticky[..., range(K), range(K)] = stay
        use_sticky = rng.random(size[:-1] + (K, 1)) < 0.5
        return np.where(use_sticky, sticky, dense)

    shared = transition_rows((n, K))  # (n, K, K)
    own = transition_rows((n, L + 1, K))  # (n, L+1, K, K): left edge, L-1 inside, right edge
    per_position = rng.random(n) < 0.5
    P = np.where(per_position[:, None, None, None], own, shared[:, None])
    with np.errstate(divide="ignore"):
        logP = np.log(P)
    scale = np.exp(rng.uniform(np.log(0.1), np.log(10.0), size=n))
    a = scale[:, None, None] * rng.standard_normal((n, L, K))
    left, right = (rng.random(n) >= edge_prob for _ in range(2))
    idx = np.arange(n)
    zl = rng.integers(0, K, size=n)
    zr = rng.integers(0, K, size=n)
    a[:, 0] += np.where(left[:, None], logP[idx, 0, zl, :], 0.0)
    a[:, -1] += np.where(right[:, None], logP[idx, L, :, zr], 0.0)
    b = logP[:, 1:L]
    params = canonical_chain_params(a, b)
    log_cond = chain_motif_log_conditional(params, K, L)
    pick = inverse_cdf(np.cumsum(np.exp(log_cond), axis=1), rng.random(n))
    x_block = chain_block_states(K, L)[pick]
    return x_block, np.zeros((n, 0), np.int64), params


def chain_blocks(
    variable: str,
    n_states: int,
    n_categories: int,
    length: int,
    *,
    stride: int | None = None,
    order: np.ndarray | None = None,
):
    """Chain blocks of ``L`` consecutive states covering a chain variable of ``n_states``.

    Blocks start every ``stride`` states along the chain (default ``L``: a tiling; the last
    block is shifted inward so it ends at the chain's end, so it may overlap its neighbour).
    ``order`` lists the variable's states (positions in its raveled value) in chain order
    (default: as numbered; see :func:`pymc_lbp.samplers.block.motifs.finding.chain_order`).
    Parameters are computed by the step from the model (``params_from="chain"``).
    """
    motif = chain_motif(n_categories, length)
    T, L = int(n_states), int(length)
    if T < L:
        raise ValueError(f"the chain {variable!r} has {T} states, fewer than a block of {L}")
    stride = L if stride is None else int(stride)
    if stride < 1:
        raise ValueError(f"stride must be positive, got {stride}")
    natural = np.arange(T, dtype=np.int64)
    order = natural if order is None else np.asarray(order, dtype=np.int64)
    if np.sort(order).tolist() != natural.tolist():
        raise ValueError(f"order must list each of the {T} states of {variable!r} once")
    in_order = bool(np.array_equal(order, natural))
    blocks = [
        MotifBlock(
            order[s : s + L],
            np.zeros(0, np.int64),
            label=f"{variable}[{s}:{s + L}]" if in_order else f"{variable} chain[{s}:{s + L}]",
        )
        for s in _starts(T, L, stride)
    ]
    return BlockSet(motif, blocks, "flat", (variable,), params_from=CHAIN_PARAMS_FROM)


__all__ = [
    "CLIP",
    "canonical_chain_params",
    "chain_block_states",
    "chain_blocks",
    "chain_log_potential",
    "chain_motif",
    "chain_motif_log_conditional",
    "chain_motif_samples",
    "chain_potentials_from_reference",
    "chain_reference_states",
    "chain_shape",
    "split_chain_params",
]
