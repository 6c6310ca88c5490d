"""NeuralBlock's inspection methods: its blocks' training examples from posterior draws
(:meth:`~NeuralBlockInspection.motif_examples`) and the exact transition probabilities of one
unit update (:meth:`~NeuralBlockInspection.unit_transitions`, for tests and diagnostics).

A mixin of :class:`pymc_lbp.samplers.block.step.NeuralBlock`; it reads the step's units
(:mod:`pymc_lbp.samplers.block.step_units`) and targets
(:mod:`pymc_lbp.samplers.block.step_kernel`).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_lbp.samplers.block.reference import (
    block_log_prob,
    enumerate_block_states,
    exact_block_log_probs,
)
from pymc_lbp.samplers.common import (
    mh_accept_probs,
    mh_log_ratio,
)


class NeuralBlockInspection:
    """Training examples and exact transition probabilities of :class:`NeuralBlock`."""

    # ------------------------------------------------------------------ training data
    def motif_examples(self, idata, *, model=None, max_draws: int | None = None):
        """Training examples of the blocks' motif cut from posterior draws of this model.

        For every draw (all chains, at most ``max_draws``, evenly spaced) and every block: the
        block's values, its conditioning values and its local parameters at that draw (chain
        blocks: read from the model with the draw's values of every other variable). Train a
        proposal for your own model with them, e.g. from a run of exact block Gibbs::

            exact = NeuralBlock([z], blocks=chain_blocks("z", T, K, 4), proposal="exact")
            idata = pm.sample(step=[exact])
            proposal = NeuralProposal.create(exact.blockset.motif)
            proposal.fit(exact.motif_examples(idata), steps=5000)

        (Forward samples of the prior,
        :func:`pymc_lbp.samplers.block.motifs.training_samples.prior_motif_samples`, need a model
        without ``pm.Potential`` terms; posterior draws work for any model.)

        Parameters
        ----------
        idata : arviz.InferenceData
            With a posterior group holding the step's variables and the variables its blocks'
            parameters depend on.
        model : pymc.Model, optional
            Default: the model on the context stack.
        max_draws : int, optional

        Returns
        -------
        x_block, x_cond, params : ndarrays
            One row per (draw, block), as :meth:`NeuralProposal.fit` takes them.
        """
        model = pm.modelcontext(model)
        if self.blockset is None or not len(self.blockset):
            raise ValueError("this step has no motif blocks (blocks=None or none found)")
        if self.blockset.motif is None:
            raise ValueError(
                "blocks without a motif (exact block Gibbs only) have no motif examples"
            )
        post = idata.posterior
        n_total = post.sizes["chain"] * post.sizes["draw"]
        keep = np.arange(n_total)
        if max_draws is not None and max_draws < n_total:
            keep = np.linspace(0, n_total - 1, int(max_draws)).round().astype(np.int64)

        def flat(name: str) -> np.ndarray:
            v = post[name].values
            return v.reshape(n_total, *v.shape[2:])[keep]

        mine = {s.name: flat(s.name) for s in self.specs}
        others = {}
        by_value = {v.name: v for v in model.value_vars}
        for name in self.shared:
            rv = model.values_to_rvs[by_value[name]]
            values = flat(rv.name)
            transform = model.rvs_to_transforms.get(rv)
            if transform is not None:
                values = transform.forward(pt.as_tensor(values), *rv.owner.inputs).eval()
            others[name] = np.asarray(values)
        saved = {name: sh.get_value() for name, sh in self.shared.items()}
        xb, xc, pr = [], [], []
        try:
            for d in range(keep.size):
                for name, sh in self.shared.items():
                    sh.set_value(others[name][d].astype(sh.dtype))
                self._refresh_outside()
                x = np.concatenate([np.asarray(mine[s.name][d]).ravel() for s in self.specs])
                z = self._z(x.astype(np.int64))
                for unit in self._units:
                    if unit.kind == "site":
                        continue
                    params = unit.params if unit.chain is None else self.chain_params(unit, x)
                    xb.append(z[unit.block_idx])
                    xc.append(z[unit.cond_idx])
                    pr.append(params)
        finally:
            for name, sh in self.shared.items():
                sh.set_value(saved[name])
            self._refresh_outside()
        return (
            np.array(xb, dtype=np.int64),
            np.array(xc, dtype=np.int64).reshape(len(xb), -1),
            np.array(pr, dtype=np.float64).reshape(len(xb), -1),
        )

    # ------------------------------------------------------------------ diagnostics
    def unit_transitions(self, u: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact transition probabilities of one update of unit ``u`` from ``x``.

        Enumerates every joint state of the unit's free entries with the step's own proposal,
        target and acceptance code (for tests and diagnostics).

        Returns
        -------
        states : ndarray of int, shape (S, n_sites)
            Every state the update can reach (``x`` included).
        probs : ndarray, shape (S,)
            Their probabilities (summing to 1).
        """
        x = np.asarray(x, dtype=np.int64)
        unit = self._units[u]
        cards = self._site_cards()[unit.sites]
        states = unit.states if unit.states is not None else enumerate_block_states(cards)
        Y = np.repeat(x[None, :], states.shape[0], axis=0)
        Y[:, unit.sites] = states
        lp = self._target_states(unit, x, Y)
        if unit.kind != "neural":
            return Y, np.exp(exact_block_log_probs(lp))
        current = int(np.flatnonzero((states == x[unit.sites]).all(axis=1))[0])
        log_w, log_tables = self.unit_proposal(u, x)
        log_q_x = block_log_prob(log_w, log_tables, x[unit.sites])
        probs = np.zeros(states.shape[0])
        for s, new in enumerate(states):
            log_q = block_log_prob(log_w, log_tables, new)
            if s == current:
                probs[s] += np.exp(log_q)
                continue
            ratio = mh_log_ratio(lp[current], float(lp[s]), log_q, log_q_x)
            acc = float(mh_accept_probs(ratio))  # the one MH rule (+inf accepts)
            probs[s] += np.exp(log_q) * acc
            probs[current] += np.exp(log_q) * (1.0 - acc)
        return Y, probs
