"""Joint updates of a binary flag and the continuous value it gates, from Laplace proposals.

A model such as ``y ~ Normal(X @ (g * b), s)`` with ``g ~ Bernoulli``, ``b ~ Normal(0, 2)``
pairs each flag ``g_j`` with a value ``b_j`` whose conditional scale depends on the flag: its
prior's (2) while the flag is off, the data's (here about 0.08) while it is on. A flag move
that keeps ``b_j`` turns a predictor on only when NUTS happens to leave ``b_j`` near zero, and
no one mass matrix suits both scales. The pair update draws ``(g_j, b_j)`` together from the
pair's full conditional, approximated once per flag state by a Laplace approximation of the
value's conditional, and corrects with Metropolis-Hastings (Wang et al. 2018's mixed blocks,
with a Laplace proposal in place of a network):

1. for ``r`` in ``{0, 1}``, with the other variables as they are: the logp and its gradient
   with respect to the value at ``b_j = -DELTA`` and ``+DELTA`` give the curvature ``h_r``, the
   slope ``c_r`` at 0 and the logp ``l_r`` at 0 (exact for a conditional that is Gaussian in
   ``b_j``); the Laplace approximation is ``N(m_r, s_r^2)`` with ``m_r = -c_r / h_r``,
   ``s_r = (-h_r)^(-1/2)``, and its mass ``w_r = l_r - c_r^2 / (2 h_r) + log s_r``;
2. the flag ``r'`` with probability ``exp(w_r') / (exp(w_0) + exp(w_1))``, then
   ``b' ~ N(m_r', s_r'^2)``;
3. accept with ``min{1, pi(y) q(x_j) / (pi(x) q(y_j))}`` (the one MH rule,
   :func:`pymc_lbp.samplers.common.mh_log_ratio`), ``q`` the proposal's density in the pair.

``q`` depends on the other variables only, never on the pair's own values: an independence
proposal within the pair's full conditional, so the chain is exact whatever the model; where
the value's conditional is Gaussian (a linear-Gaussian likelihood, a Gaussian prior) ``q`` is
that conditional and every update is accepted (a Gibbs draw of the pair). Where the Laplace
approximation cannot be formed for a state (curvature not negative, something not finite) the
update proposes the other flag with the value kept (a symmetric proposal); which proposal is
made depends on the other variables alone, so each is an MH update of the pair's conditional
and the flags move in any model, with no other step on them.

In ``pymc_lbp.sample`` the pair updates move such flags instead of a default step, and NUTS's
inverse mass of the values follows their flags' states (adapted apart over the draws where a
flag is on: :mod:`pymc_lbp.whole_model.warmup`), so no trajectory starts at the wrong scale.

Versions
--------
reference
    ``pair_update`` / ``sweep`` (``reference.py``): numpy, from a ``logp_and_gradient``
    callable and the uniforms; the test oracle.
jax
    ``pair_draw`` (``jax_steps.py``): the same arithmetic in JAX, a sweep over the pairs in a
    random order per draw, for the compiled whole-model program.
finding
    ``find_pairs`` (``finding.py``): which (flag, value) variables of a model are paired (those
    it multiplies entry by entry).

Tests: ``tests/samplers/laplace_pairs/`` (the update leaves exact posterior draws distributed
as they were, Gaussian and non-Gaussian; the JAX sweep makes the reference's moves; which
models are paired) and ``tests/whole_model/test_exact_posteriors.py`` (through
``pymc_lbp.sample``).
"""
