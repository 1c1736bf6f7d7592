# Checks that need no GPU and no network beyond fixed-output fetches. They are flake checks and,
# linked together, the `cpu-checks` package for hosts whose builders lack the `cuda` feature.
{
  pkgs,
  lib,
  deep-gemm,
  sglangSrc,
  sglangPatches,
}:
let
  # A check over a builtins-only test set ({ failures, count }): the tests run while the derivation
  # is instantiated, its build fails when any failed.
  libTestsCheck =
    drvName: what: tests:
    pkgs.runCommand drvName
      {
        failures = builtins.toJSON tests.failures;
        count = toString tests.count;
      }
      ''
        if [ "$failures" != "[]" ]; then
          echo "${what} tests failed: $failures" >&2
          exit 1
        fi
        echo "$count ${what} tests passed" | tee $out
      '';
in
{
  # nix/lib's unit tests, evaluated while this derivation is instantiated.
  nix-lib = libTestsCheck "nix-lib-tests" "nix/lib" (import ./lib/tests);

  # The builtins-only tests of nix/lib/{hf-cache,image-plan,gpu-batteries}.nix, the same way.
  nix-lib-weights-images = libTestsCheck "nix-lib-weights-images-tests" "weights/images nix/lib" (
    import ./lib/tests/weights-images.nix
  );

  # DeepGEMM's wheel with the fence: the patch applies with --fuzz=0 and the header holds the fence
  # (the package's own install check).
  deep-gemm-fenced = deep-gemm;

  # The offline suite's tests that need neither network nor Nix, on nixpkgs' Python over a filtered
  # source (nix/python-offline-tests.nix; the selection is checks/offline/checkhelpers/sandbox_selection.py).
  python-offline-tests = (import ./python-offline-tests.nix).check {
    inherit (pkgs) runCommand python3 git;
  };
}
// (if sglangSrc == null then { } else {
  # The patch series applies, in order and without fuzz, to the pinned SGLang commit, and the
  # preflight's manifest writer (which reverses it on a copy first) accepts the result.
  sglang-patches-apply = pkgs.runCommand "sglang-patches-apply" { nativeBuildInputs = [ pkgs.python3 ]; } ''
    cp -r ${sglangSrc} tree
    chmod -R u+w tree
    mkdir series
    for patch in ${lib.escapeShellArgs (map (p: "${p}") sglangPatches)}; do
      echo "applying $(basename "$patch")"
      patch -p1 --fuzz=0 --batch --forward -d tree < "$patch"
    done
    ${lib.concatMapStrings (p: "ln -s ${p} series/${lib.escapeShellArg (baseNameOf p)}\n") sglangPatches}
    python3 ${../pkgs/server/src/exactlaunch/manifest.py} write tree/python --series series
    echo "${toString (builtins.length sglangPatches)} patches apply to ${sglangSrc.rev}" | tee $out
  '';
})
