"""pinlock: compute the pins of the bit-exact SGLang flake that need a network (`nix run .#lock`)."""
