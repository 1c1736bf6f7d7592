"""Kernel benches and sweeps of the series' routes on a lent card (lab/README.md)."""
