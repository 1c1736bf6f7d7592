# sgl-deep-gemm as locked (the 0.2.0 wheel, its uv.lock hash), with patches/deep-gemm/*.patch applied
# to the installed files. A wheel has no source tree for `patches`, so they apply after install,
# relative to site-packages (a/deep_gemm/include/...), with no fuzz.
{
  lib,
  python,
  locked,
  patches,
  fencedHeader,
}:
locked.overrideAttrs (old: {
  postInstall =
    (old.postInstall or "")
    + lib.concatMapStrings (patch: ''
      echo "applying ${baseNameOf patch}"
      patch -p1 --fuzz=0 --batch --forward -d "$out/${python.sitePackages}" < ${patch}
    '') patches;

  # The store path is immutable, so the fence cannot be lost by a reinstall; this only makes sure
  # it went in (the launcher's preflight checks the same header at run time).
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    grep -q 'cutlass::arch::fence_view_async_shared();' "$out/${python.sitePackages}/${fencedHeader}" \
      || { echo "${fencedHeader}: no fence after patching" >&2; exit 1; }
    runHook postInstallCheck
  '';

  passthru = old.passthru // {
    inherit patches fencedHeader;
  };
})
