"""``python -m pymc_lbp``: the command line (see :mod:`pymc_lbp.cli`)."""

from pymc_lbp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
