"""The perf lab: 27B-shaped servers measured on a lent card (lab/README.md)."""
