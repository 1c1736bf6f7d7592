"""The one runner of the GPU checks (`bitexact-gpu-checks`): the plan that nix/lib/gpu-batteries.nix
evaluates, run whole on the card it reads, the same way inside the flake's GPU check and on a GPU host
without Nix."""

__version__ = "0.1.0"
