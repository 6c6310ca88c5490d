"""``pymc_lbp.sample``: a mixed model's discrete steps and NUTS compiled whole, chains vectorised.

``pm.sample`` runs each step in Python between draws, and a NUTS draw there costs what PyMC's
Python NUTS costs; ``pm.sample(nuts_sampler="numpyro" | "blackjax")`` refuses discrete variables.
:func:`sample` compiles one program per model (:mod:`pymc_lbp.whole_model.program`): the discrete
steps' transitions (:mod:`pymc_lbp.whole_model.discrete_blocks`) and BlackJAX's NUTS on PyMC's
JAX conversion of the model, warmup and draws in ``jax.lax.scan``, chains by ``jax.vmap`` of
each draw inside the scans.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence

import arviz as az
import numpy as np
import pymc as pm
import pytensor

from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.samplers.laplace_pairs.finding import find_pairs
from pymc_lbp.step_methods.base import DiscreteStep
from pymc_lbp.step_methods.neighbour_step import NeighbourStep
from pymc_lbp.whole_model.discrete_blocks import (
    NotInProgramError,
    block_draw,
    pair_blocks,
    program_kind,
)
from pymc_lbp.whole_model.inference_data import check_idata_kwargs
from pymc_lbp.whole_model.jaxify import (
    bound_data,
    data_variables,
    jax_function,
    model_value_replacements,
)
from pymc_lbp.whole_model.marginal import check_marginalize, log_choice, marginal_choice
from pymc_lbp.whole_model.program import Program
from pymc_lbp.whole_model.progress import ProgressBar

CHAIN_METHODS = ("vectorized", "sequential", "parallel")

_log = logging.getLogger("pymc_lbp")


def _require_jax():
    try:
        import blackjax  # noqa: F401
        import jax
    except ImportError as err:  # pragma: no cover - the bare install
        raise ImportError(
            f"pymc_lbp.sample needs the optional extra pymc_lbp[jax] (jax and blackjax): {err}. "
            "Install it with: pip install 'pymc_lbp[jax]'"
        ) from err
    # PyTensor's JAX backend sets jax_enable_x64 from floatX when it is first imported (off
    # under float32); import it first so that the program's float64 parts stay float64
    import pytensor.link.jax.dispatch  # noqa: F401

    jax.config.update("jax_enable_x64", True)
    use_compilation_cache()


def use_compilation_cache() -> str | None:
    """Keep JAX's compiled programs on disk, so a model sampled again (in a later process too)
    skips XLA's compilation: JAX's persistent compilation cache, in ``$PYMC_LBP_JAX_CACHE``
    (default ``~/.cache/pymc_lbp/jax``; ``0`` turns it off), unless the user configured one
    (``jax_compilation_cache_dir``), which is kept. Returns the directory in use."""
    import os
    from pathlib import Path

    import jax

    current = jax.config.jax_compilation_cache_dir
    setting = os.environ.get("PYMC_LBP_JAX_CACHE", "")
    if current or setting == "0":
        return current
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    directory = setting or str(base / "pymc_lbp" / "jax")
    jax.config.update("jax_compilation_cache_dir", directory)
    return directory


def _steps_list(step) -> list:
    if step is None:
        return []
    if isinstance(step, pm.step_methods.CompoundStep):
        return list(step.methods)
    if isinstance(step, list | tuple):
        return [s for part in step for s in _steps_list(part)]
    return [step]


def assign_steps(
    model, step, initial_point: dict | None = None, paired: Sequence[str] = ()
) -> tuple[list, list[int]]:
    """The discrete steps of the program and the positions (in ``model.value_vars``) of the
    variables NUTS samples.

    Steps the user built are kept with their options; discrete variables no step covers get the
    default sampler, one step over all of them, as :func:`pymc_lbp.register` makes
    ``pm.sample`` do (the registered class, else :class:`~pymc_lbp.LocallyBalanced`), built at
    ``initial_point`` (the model's initial point when None; :func:`sample` gives the first
    chain's start, as ``pm.sample`` builds its steps there); every continuous variable is
    NUTS's, those a :class:`~pymc_lbp.NeuralMixedBlock` also moves included. Flags named in
    ``paired`` are left to their pair updates (:mod:`pymc_lbp.samplers.laplace_pairs`).

    Raises
    ------
    TypeError
        For a step that is not one of pymc_lbp's discrete steps (PyMC's own steps: NUTS is
        BlackJAX's here, Metropolis and the others have no place in the program).
    ValueError
        For a variable two steps sample; for a step built on another model (one of its
        variables is not one of ``model.value_vars``).
    """
    from pymc_lbp.registry import registered
    from pymc_lbp.samplers.single_site.step import LocallyBalanced

    steps = _steps_list(step)
    covered = _covered(steps, model)
    discrete = [
        v
        for v in model.value_vars
        if v.dtype in pm.discrete_types and v.name not in covered and v.name not in paired
    ]
    if discrete:
        cls = registered() or LocallyBalanced
        # the program runs the step's graphs, converted to JAX; what the step compiles itself
        # judges starts and measures its differences' choice there (about 180 calls a start):
        # PyTensor's JAX backend, no C code (XLA's programs stay in JAX's persistent cache)
        steps.append(
            cls(
                discrete,
                model=model,
                initial_point=initial_point,
                compile_kwargs={"mode": "JAX"},
            )
        )
    return steps, continuous_positions(model)


def continuous_positions(model) -> list[int]:
    """Positions in ``model.value_vars`` of the variables NUTS samples: every continuous one."""
    return [i for i, v in enumerate(model.value_vars) if v.dtype not in pm.discrete_types]


def _covered(steps: list, model) -> dict[str, str]:
    """The discrete variables the user's steps sample (name -> step class); the errors of
    :func:`assign_steps` for steps the program does not take."""
    from pymc_lbp.samplers.block.step_mixed import NeuralMixedBlock

    covered: dict[str, str] = {}
    value_vars = set(model.value_vars)
    for s in steps:
        if not isinstance(s, DiscreteStep | NeuralMixedBlock):
            raise TypeError(
                f"pymc_lbp.sample: step {type(s).__name__} is not a pymc_lbp discrete step. "
                "Pass only pymc_lbp's discrete steps: the continuous variables are sampled by "
                "BlackJAX's NUTS inside the compiled program (for PyMC's own steps use "
                "pm.sample)."
            )
        for v in s.vars:
            # as pm.sample checks its steps: a step built on another model (the same names,
            # other data) would run that model's graphs, blind to this one's
            if v not in value_vars:
                raise ValueError(
                    f"pymc_lbp.sample: step {type(s).__name__} samples {v.name!r}, which is not "
                    "a value variable of the model being sampled: the step was built on another "
                    "model. Build the step inside this model's context (or pass model=...)."
                )
            if v.dtype not in pm.discrete_types:  # a NeuralMixedBlock's value: NUTS's too
                continue
            if v.name in covered:
                raise ValueError(
                    f"pymc_lbp.sample: variable {v.name!r} is sampled by two steps "
                    f"({covered[v.name]} and {type(s).__name__}); give each variable one step."
                )
            covered[v.name] = type(s).__name__
    return covered


FLOAT_DTYPES = ("float64", "float32")


def continuous_float_dtype(model, continuous: list[int]) -> str:
    """The float type NUTS runs in: that of the continuous value variables (``floatX`` when the
    model was built: float64 by default, float32 under ``floatX="float32"``); float64 for a model
    without continuous variables.

    Raises
    ------
    TypeError
        For continuous variables of a float type other than float64 and float32 (float16), or of
        both: NUTS's positions, momenta and step size are one float type.
    """
    by_dtype: dict[str, list[str]] = {}
    for i in continuous:
        v = model.value_vars[i]
        by_dtype.setdefault(str(v.dtype), []).append(v.name)
    other = {d: names for d, names in by_dtype.items() if d not in FLOAT_DTYPES}
    if other:
        raise TypeError(
            f"pymc_lbp.sample: continuous variables {other} have a float type the compiled "
            "program does not run: NUTS runs in float64 (the default) or float32 "
            '(pytensor.config.floatX = "float32" when the model is built).'
        )
    if len(by_dtype) > 1:
        raise TypeError(
            "pymc_lbp.sample: the continuous variables mix float types "
            f"({by_dtype}); NUTS's positions, momenta and step size are one float type. Build "
            'the whole model under one floatX (pytensor.config.floatX = "float32" or the '
            "default float64), with no dtype= override on a continuous variable."
        )
    return next(iter(by_dtype), "float64")


def chain_seeds(random_seed, chains: int) -> list[int]:
    """One integer seed per chain; chain ``i``'s depends on ``random_seed`` and ``i`` only, not on
    how many chains run (``numpy.random.SeedSequence`` spawn keys). A sequence of ``chains``
    seeds is used as given."""
    if isinstance(random_seed, Sequence | np.ndarray) and not isinstance(random_seed, str):
        if len(random_seed) != chains:
            raise ValueError(
                f"pymc_lbp.sample: random_seed has {len(random_seed)} entries for {chains} chains"
            )
        return [int(s) for s in random_seed]
    if isinstance(random_seed, np.random.Generator):
        random_seed = int(random_seed.integers(2**63))
    root = np.random.SeedSequence(random_seed)
    return [
        int(np.random.SeedSequence(root.entropy, spawn_key=(i,)).generate_state(1)[0])
        for i in range(chains)
    ]


def _start_points(model, chains, initvals, seeds, continuous, logp_fn) -> list[tuple]:
    """Each chain's start ``(point, logp)``: PyMC's initial points with the continuous variables
    jittered (``jitter+adapt_diag``'s uniform in [-1, 1] on the transformed values, up to 10
    tries for a finite logp), discrete values as given. Judged by :func:`_starts`."""
    from pymc.initial_point import make_initial_point_fns_per_chain

    names = [v.name for v in model.value_vars]
    rvs = [model.values_to_rvs[model.value_vars[i]] for i in continuous]
    fns = make_initial_point_fns_per_chain(
        model=model, overrides=initvals, jitter_rvs=set(rvs), chains=chains
    )
    out = []
    for fn, seed in zip(fns, seeds, strict=True):
        rng = np.random.default_rng(seed)
        for _ in range(10):
            point = {n: np.asarray(x) for n, x in fn(rng.integers(2**30)).items() if n in names}
            logp = float(logp_fn(*(point[n] for n in names))[0])
            if np.isfinite(logp):
                break
        out.append((point, logp))
    return out


def _starts(model, points: list[tuple], steps) -> list[tuple]:
    """Each chain's start in ``model.value_vars`` order, from :func:`_start_points`; a clear error
    where a site holds no value of its own or the start has probability zero."""
    names = [v.name for v in model.value_vars]
    starts = []
    for c, (point, logp) in enumerate(points):
        for s in steps:
            # every site holds one of its values (a NeuralMixedBlock's flags: the logp's check)
            if isinstance(s, DiscreteStep):
                s.check_values(s.state_vector(point), f"the start point of chain {c}")
        if not np.isfinite(logp):
            raise pm.exceptions.SamplingError(
                f"pymc_lbp.sample: the start point of chain {c} has model log-probability "
                f"{logp} (after 10 jitters of the continuous variables). Give a feasible start "
                "via initvals=..."
            )
        starts.append(tuple(point[n] for n in names))
    return starts


def _recheck_at_starts(model, steps, starts: list[tuple]) -> None:
    """Measure a ``differences="auto"`` first-order choice again at every chain's start.

    ``pm.sample`` measures it again while tuning, where the chain is; the program cannot switch
    a kernel between draws, so it is measured here, before anything is compiled. Exact for any
    chain means exact in every chain.
    """
    for s in steps:
        if isinstance(s, NeighbourStep):
            for c, values in enumerate(starts):
                s.recheck_at(_point(model, values), where=f"at chain {c}'s start")


def sample(
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    *,
    step=None,
    model=None,
    random_seed=None,
    chain_method: str = "vectorized",
    progressbar: bool = True,
    compute_convergence_checks: bool = True,
    idata_kwargs: dict | None = None,
    initvals=None,
    target_accept: float = 0.8,
    max_treedepth: int = 10,
    discard_tuned_samples: bool = True,
    marginalize: bool | str = "auto",
) -> az.InferenceData:
    """Sample a model with discrete and continuous variables as one compiled JAX program.

    Each draw of a chain is every discrete step's draw (our kernels, as in ``pm.sample``), then
    one NUTS transition (BlackJAX) of the continuous variables given the discrete ones; warmup
    adapts NUTS's step size and diagonal mass matrix with Stan's windows while the discrete
    steps move (vectorised chains share one adaptation). Chains run in one vectorised call by
    default. Where the model multiplies a ``Bernoulli`` flag by a continuous value entry by entry
    (``X @ (g * b)``) and no step of the user's takes the flag, the draw updates each (flag,
    value) pair jointly instead of a default step, and NUTS's inverse mass of the value follows
    its flag's state (:mod:`pymc_lbp.samplers.laplace_pairs`; logged, stats ``pair_accept``
    and ``pairs_switched``). Where the default step's sites are conditionally independent
    given the continuous variables, NUTS runs on the model with them summed out and each draw
    then draws them from their full conditional (``marginalize``).

    Parameters
    ----------
    draws, tune, chains : int
        Draws kept per chain, warmup draws per chain, chains.
    step : step or list of steps, optional
        pymc_lbp discrete steps built on the model (their options are kept), and
        :class:`~pymc_lbp.NeuralMixedBlock` (whose values NUTS samples as well). Discrete
        variables without one get the default sampler (:func:`pymc_lbp.register`'s class,
        else :class:`~pymc_lbp.LocallyBalanced`); continuous ones are NUTS's.
    model : pymc.Model, optional
    random_seed : int, optional
        The same seed gives the same draws (for the same ``chains`` and ``chain_method``); chain
        ``i``'s seed does not depend on ``chains``. ``"sequential"`` (and one chain) reproduces
        chain ``i`` bit for bit whatever ``chains`` (given the same steps: the default step is
        built at chain 0's start); ``"vectorized"`` gives it the same in distribution (its
        chains share one warmup adaptation).
    chain_method : {"vectorized", "sequential", "parallel"}
        ``jax.vmap`` over chains (of each draw, inside the scans) in one compiled call; one
        chain after another (same compiled function); ``jax.pmap`` over the devices (at most
        one chain per device).
    progressbar : bool
    compute_convergence_checks : bool
        ArviZ's R-hat and ESS checks, logged as ``pm.sample`` logs them.
    idata_kwargs : dict, optional
        As in ``pm.sample`` (:func:`pymc.to_inference_data`): ``log_likelihood`` and
        ``log_prior`` (True or variable names) add the pointwise log likelihood and log prior
        (:func:`pymc.compute_log_likelihood`, :func:`pymc.compute_log_prior`),
        ``include_transformed`` keeps the transformed values, ``coords`` and ``dims`` update the
        model's; ``save_warmup``, ``prior``, ``posterior_predictive`` and
        :func:`arviz.from_dict`'s other groups are passed to it. Checked before sampling.
    initvals : dict or list of dict, optional
        Start values, as in ``pm.sample``.
    target_accept : float
        NUTS's target acceptance (PyMC's default 0.8).
    max_treedepth : int
        NUTS's largest tree depth (doublings).
    discard_tuned_samples : bool
        False keeps the warmup draws in ``warmup_posterior`` / ``warmup_sample_stats``.
    marginalize : {"auto", True, False}
        Whether NUTS runs on the model with the default step's discrete variables summed out
        (pymc-extras' marginal logp; :mod:`pymc_lbp.whole_model.marginal`), each draw then
        drawing them from their full conditional given NUTS's new values. ``"auto"`` does it
        where the default step's sites are conditionally independent given the continuous
        variables (a mixture's assignments, a spike-and-slab prior's indicators), of at most
        16 states each, and pymc-extras is installed and sums them; the choice and its reason
        are logged (INFO) and ``idata.posterior.attrs["marginalized"]`` names what was
        summed. ``True`` requires it (an error says why it cannot be done), ``False`` samples
        the joint model. Summed, ``lp`` is the marginal log density.

    Returns
    -------
    arviz.InferenceData
        The groups, names, dims and coords of ``pm.sample`` on the same model
        (deterministics included); ``sample_stats`` holds the discrete steps' stats, NUTS's
        (``diverging``, ``energy``, ``tree_depth``, ``n_steps``, ``acceptance_rate``,
        ``step_size``), ``lp`` and ``tune``.

    Raises
    ------
    ImportError
        Without jax and blackjax (``pip install 'pymc_lbp[jax]'``).
    NotInProgramError
        For a step whose transitions the program cannot run (named).
    TypeError
        For steps that are not ours; for continuous variables in float16 or in two float
        types (named); for ``idata_kwargs`` ``pm.sample`` does not take.
    ValueError
        For bad option values; for a step built on another model (the step and variable
        named); for a truncated discrete variable whose distribution is not supported.

    Notes
    -----
    Precision follows the model: float64 by default; a model built under
    ``pytensor.config.floatX = "float32"`` (or ``pytensor.config.change_flags(floatX=
    "float32")``) runs NUTS in float32 (positions, momenta, logp and gradient, step size,
    inverse mass matrix; the continuous posterior comes back float32), while every
    Metropolis-Hastings log acceptance ratio of the discrete steps, the uniform it is compared
    with and the differences the kernels propose from are float64, as are NUTS's energies and
    acceptance statistics (its log density is the float32 logp cast to float64). Under float64
    nothing is cast: the same draws for a seed. JAX's ``jax_enable_x64`` is turned on for the
    process in both cases.
    """
    for name, value, least in (
        ("draws", draws, 1),
        ("tune", tune, 0),
        ("chains", chains, 1),
        ("max_treedepth", max_treedepth, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            raise ValueError(
                f"pymc_lbp.sample: {name} must be an integer >= {least}, got {value!r}"
            )
    if chain_method not in CHAIN_METHODS:
        raise ValueError(
            f"pymc_lbp.sample: chain_method must be one of {CHAIN_METHODS}, got {chain_method!r}"
        )
    if not 0 < target_accept < 1:
        raise ValueError(f"pymc_lbp.sample: target_accept must be in (0, 1), got {target_accept}")
    check_marginalize(marginalize)
    _require_jax()
    import jax
    import jax.numpy as jnp

    model = pm.modelcontext(model)
    if not model.value_vars:
        raise ValueError("pymc_lbp.sample: the model has no free variables to sample.")
    t0 = time.perf_counter()
    idata_kwargs = check_idata_kwargs(model, idata_kwargs)  # not after the draws
    user_steps = _steps_list(step)
    covered = _covered(user_steps, model)
    for s in user_steps:  # a step the program cannot run fails before anything is compiled
        program_kind(s)
    continuous = continuous_positions(model)
    float_dtype = continuous_float_dtype(model, continuous)
    logp_fn = jax_function([], [model_logp(model)], model, {})
    seeds = chain_seeds(random_seed, chains)
    # jitted: op by op, the check would compile every op of the logp on its own
    points = _start_points(model, chains, initvals, seeds, continuous, jax.jit(logp_fn))
    # flags the model multiplies by their values: the pair updates' (samplers/laplace_pairs)
    flags = [v.name for v in model.value_vars if v.dtype in pm.discrete_types]
    shapes = {name: np.shape(x) for name, x in points[0][0].items()}
    pairs = find_pairs(model, [f for f in flags if f not in covered], shapes)
    # the default step is built at the first chain's start, as pm.sample builds its steps (and
    # PyMC's initial-point function is compiled once, not once more for the step)
    steps, continuous = assign_steps(
        model, step, initial_point=points[0][0], paired=[f for f, _ in pairs]
    )
    for s in steps[len(user_steps) :]:
        program_kind(s)
    summed, reason, marginal = marginal_choice(model, steps, len(user_steps), marginalize)
    log_choice(summed, reason)
    starts = _starts(model, points, steps)
    _recheck_at_starts(model, steps, starts)
    replacements = model_value_replacements(model, steps)
    blocks = [
        block_draw(
            s,
            model,
            replacements,
            [s.state_vector(_point(model, v)) for v in starts]
            if isinstance(s, DiscreteStep)
            else [],
        )
        for s in steps
    ]
    blocks += pair_blocks(model, pairs)
    names = [v.name for v in model.value_vars]
    gated = {names.index(value): names.index(flag) for flag, value in pairs}
    nuts_logp_fn, logp_and_gradient = logp_fn, None
    if continuous:
        logp = model_logp(model) if marginal is None else marginal
        wrt = [model.value_vars[i] for i in continuous]
        gradient = pytensor.grad(logp, wrt, disconnected_inputs="ignore")
        logp_and_gradient = jax_function([], [logp, *gradient], model, {})
        if marginal is not None:
            nuts_logp_fn = jax_function([], [marginal], model, {})
    program = Program(
        blocks,
        continuous,
        lambda *v: nuts_logp_fn(*v)[0],
        logp_and_gradient,
        float(target_accept),
        int(max_treedepth),
        float_dtype,
        gated,
        nuts_first=bool(summed),
    )
    _log_program(model, blocks, continuous, chains, chain_method, nuts_first=bool(summed))
    bar = ProgressBar(tune, draws, chains, chain_method, enabled=progressbar)

    # the model's data are arguments of the compiled program (jax_function's inputs): new
    # values of the same shape (pm.set_data) compile to the same XLA program
    data_vars = data_variables(model)
    data = tuple(np.asarray(v.get_value()) for v in data_vars)

    def run(key, values, data, chains=None):
        with bound_data(dict(zip(data_vars, data, strict=True))):
            return program.run_chain(key, values, tune, draws, bar.callback, chains=chains)

    # numpy between calls: each eager JAX op here would be an XLA compile of its own
    keys = np.stack([np.asarray(jax.random.PRNGKey(int(s))) for s in seeds])
    if chain_method == "parallel" and chains > jax.local_device_count():
        raise ValueError(
            f"pymc_lbp.sample: chain_method='parallel' runs one chain per device; {chains} "
            f"chains, {jax.local_device_count()} device(s). Use chain_method='vectorized'."
        )
    unbatched = chain_method == "sequential" or (chain_method == "vectorized" and chains == 1)
    if unbatched:
        # one chain vectorised is one chain: traced without vmap's batching rules (which trace
        # a draw again) it builds faster and draws what "sequential" draws
        fn = jax.jit(run).lower(keys[0], starts[0], data).compile()
        args = [(keys[c], starts[c], data) for c in range(chains)]
    else:
        stacked = tuple(np.stack([s[i] for s in starts]) for i in range(len(starts[0])))
        if chain_method == "parallel":
            batched = jax.pmap(run, in_axes=(0, 0, None))
        else:  # the chains batched inside the scans (Program.run_chain)
            batched = jax.jit(functools.partial(run, chains=chains))
        fn = batched.lower(keys, stacked, data).compile()
        args = [(keys, stacked, data)]
    t_built = time.perf_counter()
    _log.info("Built in %.1f seconds (steps, JAX program, XLA compile).", t_built - t0)
    with bar:
        results = [jax.block_until_ready(fn(*a)) for a in args]
    t_sampled = time.perf_counter()
    _log.info(
        "Sampling %d chain%s for %s tune and %s draw iterations (%s + %s draws total) took "
        "%.1f seconds.",
        chains,
        "s" if chains > 1 else "",
        f"{tune:_d}",
        f"{draws:_d}",
        f"{tune * chains:_d}",
        f"{draws * chains:_d}",
        t_sampled - t_built,
    )
    result = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *results) if unbatched else results[0]
    from pymc_lbp.whole_model.inference_data import to_inference_data

    idata = to_inference_data(
        model,
        result,
        blocks,
        tune=tune,
        discard_tuned_samples=discard_tuned_samples,
        times={"build_time": t_built - t0, "sampling_time": t_sampled - t_built},
        idata_kwargs=idata_kwargs,
    )
    if summed:
        idata.posterior.attrs["marginalized"] = ", ".join(summed)
    if compute_convergence_checks:
        from pymc.stats.convergence import log_warnings, run_convergence_checks

        log_warnings(run_convergence_checks(idata, model))
    return idata


def _log_program(
    model, blocks: list, continuous: list[int], chains: int, method: str, nuts_first: bool
) -> None:
    """What the program runs, as ``pm.sample`` logs its steps: each discrete step and its
    variables, NUTS's, in the order of a draw, and the chains (INFO, the ``pymc_lbp``
    logger)."""
    rv_name = {v.name: model.values_to_rvs[v].name for v in model.value_vars}  # as PyMC's
    lines = []
    for b in blocks:
        pair = hasattr(b.step, "flag")  # a LaplacePairs block
        names = [b.step.flag, b.step.value] if pair else [v.name for v in b.step.vars]
        lines.append(f">{type(b.step).__name__}: [{', '.join(rv_name[n] for n in names)}]")
    if continuous:
        names = ", ".join(rv_name[model.value_vars[i].name] for i in continuous)
        nuts = f">NUTS (BlackJAX): [{names}]"
        lines = [nuts, *lines] if nuts_first else [*lines, nuts]
    _log.info("pymc_lbp.sample, one compiled program:\n%s", "\n".join(lines))
    _log.info("%d chain%s, chain_method=%r", chains, "s" if chains > 1 else "", method)


def _point(model, values: Sequence) -> dict:
    return {v.name: np.asarray(x) for v, x in zip(model.value_vars, values, strict=True)}


__all__ = ["NotInProgramError", "assign_steps", "sample"]
