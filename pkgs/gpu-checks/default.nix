# The runner of the GPU checks (`bitexact-gpu-checks`) as a Nix package, built with the server env's
# Python packages (`python3Packages`) like bitexact. It needs only the standard library at import; it runs
# in the server venv's Python (nix/gpu-checks.nix wraps it), where gpuhost reads the card through NVML.
# Its tests run in the offline suite (checks/offline/run.sh). Built by nix/local-python-package.nix.
{
  lib,
  python3Packages,
}:
(import ../../nix/local-python-package.nix { root = ./.; }).nixpkgsApplication python3Packages { } {
  pythonImportsCheck = [
    "gpuchecks.plan"
    "gpuchecks.results"
  ];

  meta = {
    description = "The one runner of the bit-exact GPU checks: kernel checks, references, batteries, goldens";
    mainProgram = "bitexact-gpu-checks";
    license = lib.licenses.asl20;
  };
}
