"""NeuralBlock's compiled paths: the compiled chain sweep (colour classes of chain blocks, in
one compiled call per draw) and the compiled random scan, each compiled at its first use.

A mixin of :class:`pymc_lbp.samplers.block.step.NeuralBlock`; the graphs are built by
:mod:`pymc_lbp.samplers.block.sweep_graph` and :mod:`pymc_lbp.samplers.block.random_scan_graph`.
Their numpy references, which take the same uniforms: the random-scan step
:meth:`~pymc_lbp.samplers.block.step_kernel.NeuralBlockKernel.scan_step` (also what runs
the units no compiled scan takes) and the colour-class update
:func:`pymc_lbp.samplers.block.reference.colour_update` (a test oracle).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from pymc_lbp.samplers.block.neural_proposal import NeuralProposal
from pymc_lbp.samplers.block.random_scan_graph import CompiledRandomScan, ScanFactors, ScanUnits
from pymc_lbp.samplers.block.step_units import ModelLogp
from pymc_lbp.samplers.block.sweep_graph import ChainColour, CompiledChainSweep
from pymc_lbp.step_methods.base import DrawResult


class NeuralBlockCompiled:
    """The compiled sweep and compiled random scan of :class:`NeuralBlock`."""

    # ------------------------------------------------------------------ compiled sweep
    @cached_property
    def sweep_compilable(self) -> bool:
        """Whether the sweeps can run compiled: colour classes of chain blocks (neural or exact
        block updates), scored with the model logp (fixed at construction; checked once)."""
        if self.colours is None or not isinstance(self.target, ModelLogp):
            return False
        for colour in self.colours:
            units = [self._units[u] for u in colour]
            if not all(u.free.all() and u.kind == units[0].kind for u in units):
                return False
            if units[0].kind == "neural" and not all(u.chain is not None for u in units):
                return False
            same = all(np.array_equal(u.states, units[0].states) for u in units)
            if units[0].kind == "exact" and not same:
                return False
            if units[0].kind not in ("neural", "exact"):
                return False
        return True

    @property
    def chain_sweep(self) -> CompiledChainSweep:
        """The compiled sweep (:class:`pymc_lbp.samplers.block.sweep_graph.CompiledChainSweep`),
        compiled on first use."""
        if self._chain_sweep is None:
            self._chain_sweep = CompiledChainSweep(
                self.chain_colours(),
                self.layout.n_sites,
                self.target.rows_graph,
                self.proposal.net if isinstance(self.proposal, NeuralProposal) else None,
                self.target._compile_kwargs,
            )
        return self._chain_sweep

    def chain_colours(self) -> list[ChainColour]:
        """The colour classes as the sweep's graph takes them (a step whose
        :attr:`sweep_compilable`)."""
        colours = []
        for colour in self.colours:
            units = [self._units[u] for u in colour]
            sites = np.stack([u.sites for u in units])
            if units[0].kind == "exact":
                colours.append(ChainColour(sites, states=units[0].states))
            else:
                colours.append(ChainColour(sites, *units[0].chain))
        return colours

    def sweep_weights(self) -> list[np.ndarray]:
        """The network arrays the sweep takes (:data:`~pymc_lbp.samplers.block.sweep_graph.
        WEIGHT_NAMES`; placeholders for exact block updates only, which do not read them)."""
        if isinstance(self.proposal, NeuralProposal):
            return self.proposal.graph_inputs()
        return [np.zeros((1,) * nd) for nd in (1, 2, 2, 1, 2, 1)]

    def _run_compiled_sweeps(self, x, logp, n_sweeps: int) -> tuple[np.ndarray, float, float, int]:
        if n_sweeps == 0:
            return x, logp, 0.0, 0
        sweep = self.chain_sweep
        # the uniforms the reference colour_update takes, sweep by sweep, class by class
        draws = [
            [self.rng.random((c.sites.shape[0], c.uniform_width)) for c in sweep.colours]
            for _ in range(n_sweeps)
        ]
        uniforms = [np.stack(per_class) for per_class in zip(*draws, strict=True)]
        x, logp, total_accept, n_accepted, evals = sweep(x, logp, uniforms, self.sweep_weights())
        self._draw_evals += evals
        return x, logp, total_accept, n_accepted

    # ------------------------------------------------------------------ compiled random scan
    @cached_property
    def scan_compilable(self) -> bool:
        """Whether the random-scan steps can run compiled
        (:mod:`pymc_lbp.samplers.block.random_scan_graph`): every unit but chain blocks, whose
        parameters are read from the model at each update (they run as colour-class sweeps), and
        elimination blocks (``BlockGibbs``), drawn by bucket elimination in numpy."""
        return all(u.chain is None and u.kind != "eliminate" for u in self._units)

    def scan_units(self) -> tuple[ScanUnits, ScanFactors | None]:
        """The units (and factor-local targets) as the padded arrays of the compiled scan;
        positions index ``z = [x, outside values, 0]``, padding points at the last entry."""
        units = self._units
        U, D = len(units), self.scan_width - 3
        dummy = self.layout.n_sites + len(self._outside)
        M = max(u.cond_idx.size for u in units)
        neural = np.array([u.kind == "neural" for u in units])
        block_idx = np.full((U, D), dummy, dtype=np.int64)
        free = np.zeros((U, D), dtype=bool)
        cond_idx = np.full((U, M), dummy, dtype=np.int64)
        tables: dict[bytes, int] = {}
        state_list, state_set = [], np.zeros(U, dtype=np.int64)
        n_states = np.zeros(U, dtype=np.int64)
        for i, u in enumerate(units):
            if u.kind == "neural":
                block_idx[i, : u.block_idx.size] = u.block_idx
                free[i, : u.free.size] = u.free
                cond_idx[i, : u.cond_idx.size] = u.cond_idx
                continue
            block_idx[i, : u.sites.size] = u.sites
            free[i, : u.sites.size] = True
            key = u.states.tobytes() + str(u.states.shape).encode()
            if key not in tables:
                tables[key] = len(state_list)
                state_list.append(u.states)
            state_set[i], n_states[i] = tables[key], u.states.shape[0]
        S = max((t.shape[0] for t in state_list), default=1)
        states = np.zeros((max(len(state_list), 1), S, D), dtype=np.int64)
        for t, st in enumerate(state_list):
            states[t, : st.shape[0], : st.shape[1]] = st
        scan_units = ScanUnits(neural, block_idx, free, cond_idx, states, state_set, n_states)
        if self._factors is None:
            return scan_units, None
        F = max(u.factors.offsets.size for u in units)
        R = self._factors.scope_pos.shape[1]
        flat = np.concatenate([self._factors.flat, [0.0]])
        offsets = np.full((U, F), flat.size - 1, dtype=np.int64)
        positions = np.zeros((U, F, R), dtype=np.int64)
        strides = np.zeros((U, F, R), dtype=np.int64)
        slot = np.full((U, F, R), -1, dtype=np.int64)
        for i, u in enumerate(units):
            f = u.factors.offsets.size
            offsets[i, :f] = u.factors.offsets
            positions[i, :f] = u.factors.positions
            strides[i, :f] = u.factors.strides
            if u.kind != "neural":
                for d, site in enumerate(u.sites.tolist()):
                    slot[i, :f][u.factors.positions == site] = d
        return scan_units, ScanFactors(flat, offsets, positions, strides, slot)

    @property
    def random_scan(self) -> CompiledRandomScan:
        """The compiled random scan
        (:class:`pymc_lbp.samplers.block.random_scan_graph.CompiledRandomScan`), compiled on first
        use."""
        if self._random_scan is None:
            units, factors = self.scan_units()
            neural = isinstance(self.proposal, NeuralProposal)
            self._random_scan = CompiledRandomScan(
                units,
                factors,
                self.target.rows_graph,
                self.layout.n_sites,
                len(self._outside),
                self.proposal.net if neural else None,
                self.target._compile_kwargs,
            )
        return self._random_scan

    def _scan_network(self) -> list[np.ndarray]:
        """The network arrays of the compiled scan
        (:data:`pymc_lbp.samplers.block.random_scan_graph. NETWORK_NAMES`) for the current
        weights."""
        if not isinstance(self.proposal, NeuralProposal):
            return [np.zeros((1,) * nd) for nd in (2, 3, 2, 1, 2, 1)]
        version = self.proposal.net.version
        if self._scan_arrays is None or self._scan_arrays[0] != version:  # once per weights
            R, base, _ = self.proposal._first_layer()
            prepared = np.zeros((len(self._units), base.size))
            for i, u in enumerate(self._units):
                if u.kind == "neural":
                    prepared[i] = self.proposal.prepare(u.params)
            w = self.proposal.net._w64
            self._scan_arrays = (version, [prepared, R, w["W1"], w["b1"], w["W2"], w["b2"]])
        return self._scan_arrays[1]

    def _run_compiled_scan(self, x, logp, deltas, n_steps: int) -> DrawResult:
        noise = self.rng.random((n_steps, self.scan_width))  # the rows scan_step would draw
        x, logp, total_accept, n_accepted, evals, last = self.random_scan(
            x, logp, self._outside_values, noise, self._scan_network()
        )
        self._draw_evals += evals
        return DrawResult(x, logp, deltas, total_accept, n_accepted, evals, 0, {"block": [last]})
