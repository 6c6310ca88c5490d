"""Trained block proposals for structural motifs: the network, its training, save and load.

A :class:`NeuralProposal` is a :class:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork` bound to
a :class:`~pymc_lbp.samplers.block.motifs.motif_api.MotifSpec`: it maps the values of a motif's
conditioning set and its local parameters to ``q(x_B | x_C, params)``, a mixture of products of
categoricals over the block. :class:`~pymc_lbp.NeuralBlock` uses it as a Metropolis-Hastings
proposal.

File format (``.npz``, loaded with ``allow_pickle=False``, so untrusted files cannot run code):

``header``
    A JSON string: ``format`` (``"pymc_lbp.neural_proposal"``), ``version``
    (:data:`VERSION`),
    ``motif`` (:meth:`MotifSpec.to_dict`), ``network`` (inputs, block cardinalities,
    components, hidden units, epsilon, activation), ``layers`` (name, shape and dtype of every
    weight array), ``sha256`` of the weights, and free ``metadata`` (how it was trained).
``W0, b0, W1, b1, W2, b2``
    float32 weight arrays.

:func:`load_proposal` checks all of it and raises :class:`ProposalFileError` (a ``ValueError``)
for a corrupt, truncated, tampered or mismatched file. Shipped proposals live in
``pymc_lbp/samplers/block/library`` and load by name (``load_proposal("grid-bn")``).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pymc_lbp.samplers.block.mdn import LAYER_NAMES, MixtureDensityNetwork, TrainingReport
from pymc_lbp.samplers.block.motifs.motif_api import MotifSpec

__all__ = [
    "FORMAT",
    "LIBRARY",
    "VERSION",
    "NeuralProposal",
    "ProposalFileError",
    "available_proposals",
    "load_proposal",
]

# the file format's name (the module it was born in, before the package was grouped by job):
# files carry it, so it never changes
FORMAT = "pymc_lbp.neural_proposal"
VERSION = 1
LIBRARY = Path(__file__).resolve().parent / "library"


class ProposalFileError(ValueError):
    """A proposal file is corrupt, of another format or version, or does not match."""


def _digest(weights: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in LAYER_NAMES:
        arr = np.ascontiguousarray(weights[name], dtype=np.float32)
        h.update(name.encode())
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


class NeuralProposal:
    """A mixture-density-network proposal for the blocks of one motif.

    Parameters
    ----------
    motif : MotifSpec
    net : MixtureDensityNetwork
        Its inputs must be the motif's features and its outputs the motif's block.
    metadata : dict, optional
        Free JSON-serialisable information (training settings, data, results).
    """

    def __init__(self, motif: MotifSpec, net: MixtureDensityNetwork, metadata: dict | None = None):
        if net.n_inputs != motif.n_features:
            raise ValueError(
                f"the network takes {net.n_inputs} inputs; motif {motif.name!r} has "
                f"{motif.n_features} features"
            )
        if tuple(net.cards) != motif.block_cards:
            raise ValueError(
                f"the network proposes cardinalities {net.cards}; motif {motif.name!r} has "
                f"{motif.block_cards}"
            )
        if net.n_continuous != motif.n_continuous:
            raise ValueError(
                f"the network proposes {net.n_continuous} continuous entries; motif "
                f"{motif.name!r} has {motif.n_continuous}"
            )
        self.motif = motif
        self.net = net
        self.metadata = dict(metadata or {})

    @classmethod
    def create(
        cls,
        motif: MotifSpec,
        *,
        n_components: int = 8,
        hidden: int | None = None,
        epsilon: float = 1e-3,
        seed: int = 0,
        sd_floor: float = 0.01,
    ) -> NeuralProposal:
        """An untrained proposal (random weights from ``seed``) for ``motif``.

        ``hidden`` defaults to 4 x max(inputs, outputs) (Wang et al.: 4-5 x); ``sd_floor`` is
        the smallest standard deviation of the Gaussians of a motif's continuous entries.
        """
        net = MixtureDensityNetwork(
            motif.n_features,
            motif.block_cards,
            n_components=n_components,
            hidden=hidden,
            epsilon=epsilon,
            seed=seed,
            n_continuous=motif.n_continuous,
            sd_floor=sd_floor,
        )
        return cls(motif, net)

    def mixture(self, x_cond: np.ndarray, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log_w (n, K), log_tables (n, K, D, C))`` for conditioning values and parameters.

        See :meth:`MixtureDensityNetwork.mixture`; ``x_cond`` has shape (n, cond_size) and
        ``params`` (n, n_params).
        """
        return self.net.mixture(self.motif.features(x_cond, params))

    def _first_layer(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """First-layer pieces, cached per weight version: ``R[j, c]`` is what conditioning
        entry ``j`` at value ``c`` adds to ``u @ W0`` relative to value 0, ``base`` the
        contribution of all-zero conditioning values plus ``b0``, ``W0p`` the parameters'
        rows of ``W0`` (the features are separable per entry, so ``u @ W0 + b0`` is
        ``base + params @ W0p + sum_j R[j, x_j]``)."""
        cache = getattr(self, "_cache", None)
        if cache is not None and cache[0] == self.net.version:
            return cache[1:]
        motif = self.motif
        W0 = self.net._w64["W0"]
        M, P = motif.cond_size, motif.n_params
        C = max(motif.cond_cards, default=2)
        R = np.zeros((M, C, W0.shape[1]))
        zero_rows = motif.features(np.zeros((M, M), np.int64), np.zeros((M, P)))
        for c in range(1, C):
            R[:, c] = (
                motif.features(np.eye(M, dtype=np.int64) * c, np.zeros((M, P))) - zero_rows
            ) @ W0
        base = motif.features(np.zeros((1, M), np.int64), np.zeros((1, P)))[0] @ W0
        base = base + self.net._w64["b0"]
        W0p = W0[W0.shape[0] - P :]
        self._cache = (self.net.version, R, base, W0p)
        return R, base, W0p

    def prepare(self, params: np.ndarray) -> np.ndarray:
        """The first layer's pre-activation at all-zero conditioning values (hidden,).

        Pass it to :meth:`mixture_at`, which adds the conditioning values' part; for a block
        whose parameters are fixed this is computed once.
        """
        _, base, W0p = self._first_layer()
        return base + np.asarray(params, dtype=np.float64) @ W0p

    def mixture_at(self, x_cond: np.ndarray, prepared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mixture for one conditioning state, given :meth:`prepare` of its parameters.

        Returns ``(log_w (K,), log_tables (K, D, C))``; equal to :meth:`mixture` up to
        rounding.
        """
        R = self._first_layer()[0]
        x_cond = np.asarray(x_cond, dtype=np.int64)
        a0 = prepared + R[np.arange(x_cond.size), x_cond].sum(axis=0)
        log_w, log_tables = self.net.mixture_from_preactivation(a0[None])
        return log_w[0], log_tables[0]

    def graph_inputs(self) -> list[np.ndarray]:
        """The arrays a compiled proposal graph takes for the current weights, in the order of
        :data:`pymc_lbp.samplers.block.sweep_graph.WEIGHT_NAMES`: the first layer's pre-activation
        at all-zero conditioning values and parameters (``b0`` included), the parameters' rows of
        ``W0``, then ``W1, b1, W2, b2`` (float64)."""
        _, base, W0p = self._first_layer()
        w = self.net._w64
        return [base, W0p, w["W1"], w["b1"], w["W2"], w["b2"]]

    def log_prob(self, x_block: np.ndarray, x_cond: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``log q(x_B | x_C, params)`` for rows of block values (the discrete entries, then
        the continuous ones), shape (n,)."""
        u = self.motif.features(x_cond, params)
        return self.net.log_prob(u, np.asarray(x_block).reshape(u.shape[0], -1))

    def fit(
        self,
        data: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, np.ndarray]]
        | tuple[np.ndarray, np.ndarray, np.ndarray],
        **options,
    ) -> TrainingReport:
        """Maximum-likelihood training on motif samples ``(x_block, x_cond, params)``.

        Parameters
        ----------
        data : callable or tuple of arrays
            ``data(rng, n) -> (x_block, x_cond, params)`` drawing fresh samples (e.g.
            :func:`~pymc_lbp.samplers.block.motifs.grid_bn.grid_bn_motif_samples`), or fixed arrays
            (e.g. from :func:`~pymc_lbp.samplers.block.motifs.training_samples.prior_motif_samples`)
            that minibatches are drawn from.
        **options
            The training's keyword arguments (``steps``, ``batch_size``, ``learning_rate``,
            ``final_learning_rate``, ``seed``, ``progressbar``, ``report_every``), as
            :meth:`MixtureDensityNetwork.fit` takes them. The same seed, data and starting
            weights give the same trained proposal.

        Returns
        -------
        TrainingReport
        """
        motif = self.motif
        if callable(data):

            def batches(rng, n):
                xb, xc, pr = data(rng, n)
                return motif.features(xc, pr), xb

        else:
            xb, xc, pr = data
            batches = (motif.features(xc, pr), np.asarray(xb, dtype=np.int64))
        report = self.net.fit(batches, **options)
        self.metadata.setdefault("training", []).append(report.as_dict())
        return report

    def header(self) -> dict[str, Any]:
        """The JSON header written by :meth:`save`."""
        net = self.net
        return {
            "format": FORMAT,
            "version": VERSION,
            "motif": self.motif.to_dict(),
            "network": {
                "n_inputs": net.n_inputs,
                "cards": list(net.cards),
                "n_components": net.n_components,
                "hidden": net.hidden,
                "epsilon": net.epsilon,
                "activation": "elu",
                **(
                    {"n_continuous": net.n_continuous, "sd_floor": net.sd_floor}
                    if net.n_continuous
                    else {}
                ),
            },
            "layers": [
                {"name": k, "shape": list(net.weights[k].shape), "dtype": "float32"}
                for k in LAYER_NAMES
            ],
            "sha256": _digest(net.weights),
            "metadata": self.metadata,
        }

    def save(self, path: str | os.PathLike, *, compress: bool = True) -> Path:
        """Write the proposal to an ``.npz`` file (see the module docstring); returns the path."""
        path = Path(path)
        if not path.name.endswith(".npz"):
            path = path.with_name(path.name + ".npz")
        header = np.array(json.dumps(self.header(), sort_keys=True))
        saver = np.savez_compressed if compress else np.savez
        with open(path, "wb") as fh:
            saver(fh, header=header, **self.net.weights)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> NeuralProposal:
        """Read a proposal written by :meth:`save`.

        Raises
        ------
        ProposalFileError
            If the file is not a readable ``.npz``, has no valid header, is of another format
            or version, lacks a layer, has a layer of the wrong shape or dtype, or its weights
            do not match the header's checksum.
        FileNotFoundError
            If there is no such file.
        """
        path = Path(path)
        where = f"proposal file {str(path)!r}"
        if not path.is_file():
            raise FileNotFoundError(f"{where} does not exist")
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError) as err:
            raise ProposalFileError(f"{where} is corrupt or not an .npz file: {err}") from err
        if "header" not in arrays or arrays["header"].dtype.kind != "U":
            raise ProposalFileError(f"{where} has no JSON header")
        try:
            header = json.loads(str(arrays["header"]))
        except json.JSONDecodeError as err:
            raise ProposalFileError(f"{where}: the header is not valid JSON: {err}") from err
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ProposalFileError(f"{where} is not a pymc_lbp neural proposal")
        if header.get("version") != VERSION:
            raise ProposalFileError(
                f"{where} has format version {header.get('version')!r}; this pymc_lbp reads "
                f"version {VERSION}"
            )
        try:
            motif = MotifSpec.from_dict(header["motif"])
            spec = header["network"]
            layers = {d["name"]: d for d in header["layers"]}
            weights = {}
            for name in LAYER_NAMES:
                if name not in arrays:
                    raise ProposalFileError(f"{where} lacks the layer {name!r}")
                arr = arrays[name]
                want = tuple(layers[name]["shape"])
                if arr.shape != want or arr.dtype != np.float32:
                    raise ProposalFileError(
                        f"{where}: layer {name!r} is {arr.dtype}{list(arr.shape)}, the header "
                        f"says float32{list(want)}"
                    )
                weights[name] = arr
            if _digest(weights) != header["sha256"]:
                raise ProposalFileError(f"{where}: the weights do not match their checksum")
            net = MixtureDensityNetwork(
                int(spec["n_inputs"]),
                tuple(spec["cards"]),
                n_components=int(spec["n_components"]),
                hidden=int(spec["hidden"]),
                epsilon=float(spec["epsilon"]),
                weights=weights,
                n_continuous=int(spec.get("n_continuous", 0)),
                sd_floor=float(spec.get("sd_floor", 0.01)),
            )
            return cls(motif, net, header.get("metadata"))
        except ProposalFileError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise ProposalFileError(f"{where} does not match its header: {err}") from err

    def __repr__(self) -> str:
        net = self.net
        return (
            f"NeuralProposal(motif={self.motif.name!r}, block={self.motif.block_size}, "
            f"cond={self.motif.cond_size}, params={self.motif.n_params}, "
            f"components={net.n_components}, hidden={net.hidden}, epsilon={net.epsilon})"
        )


def available_proposals() -> list[str]:
    """Names of the proposals shipped in ``pymc_lbp/samplers/block/library``."""
    return sorted(p.stem for p in LIBRARY.glob("*.npz"))


def load_proposal(name_or_path: str | os.PathLike) -> NeuralProposal:
    """Load a shipped proposal by name (e.g. ``"grid-bn"``) or any proposal file by path.

    Raises
    ------
    ProposalFileError
        For a corrupt or mismatched file (see :meth:`NeuralProposal.load`).
    FileNotFoundError
        For an unknown name or a missing file (the message lists the shipped names).
    """
    text = os.fspath(name_or_path)
    shipped = LIBRARY / f"{text}.npz"
    if os.sep not in text and not text.endswith(".npz") and shipped.is_file():
        return NeuralProposal.load(shipped)
    path = Path(text)
    if not path.is_file():
        raise FileNotFoundError(
            f"no proposal file {text!r} and no shipped proposal of that name; shipped: "
            f"{available_proposals()}"
        )
    return NeuralProposal.load(path)
