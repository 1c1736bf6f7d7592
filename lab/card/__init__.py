"""The GPU checks on a lent GPU host without Nix: trees assembled from wheels, the tiny model, summaries
(docs/e2e.md)."""
