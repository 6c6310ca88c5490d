"""Locally balanced samplers for discrete variables in PyMC."""
