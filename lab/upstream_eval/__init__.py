"""Evaluating the flake against the real upstream inputs (lab/README.md)."""
