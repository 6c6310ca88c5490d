"""Models: lattices, UAI networks and the benchmark targets of the papers."""
