# gpuhost in the server's package set (pyproject.nix's builders, like ../server/exactlaunch.nix): the
# launcher, the image entrypoint and the GPU checks run on that set's interpreter and import it from its
# venv, where it also gives `bitexact-driver`. Its dependencies, nvidia-ml-py for the NVML reader and
# exactformats for the cache folder and the crash guard, come from pyproject.toml
# (nix/local-python-package.nix).
(import ../../nix/local-python-package.nix { root = ./.; }).serverSet
