# The launcher's Python package (pkgs/server: pyproject.toml + src/exactlaunch), built into the server's
# package set so that it runs on the venv's interpreter: it replaces the recipe's leading `python` with
# sys.executable and its preflight finds sglang/deep_gemm through importlib. Standard library only, plus
# gpuhost and exactformats, as pyproject.toml names them (nix/local-python-package.nix).
(import ../../nix/local-python-package.nix { root = ./.; }).serverSet
