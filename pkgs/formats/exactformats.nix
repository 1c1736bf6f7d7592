# exactformats in the server's package set (pyproject.nix's builders, like ../server/exactlaunch.nix),
# so that the launcher, which runs on that set's interpreter, imports it from its venv. Standard library
# only; built by the one local-package function (nix/local-python-package.nix).
(import ../../nix/local-python-package.nix { root = ./.; }).serverSet
