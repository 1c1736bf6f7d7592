# Stand-ins for nixpkgs' trivial builders (evaluation only). Argument handling after
# pkgs/build-support/trivial-builders/default.nix (runCommandWith, writeTextFile, writeShellApplication,
# symlinkJoin, linkFarm), pkgs/top-level/all-packages.nix (makeSetupHook),
# pkgs/build-support/replace-vars/replace-vars.nix and pkgs/build-support/mkshell/default.nix: the
# inputs they put in the derivation are the ones nixpkgs puts there, so string contexts and closures
# match in shape; the build scripts are placeholders.
{
  lib,
  stdenv,
  shellcheck,
}:
let
  inherit (stdenv) mkDerivation;

  runCommandWith =
    {
      name,
      derivationArgs ? { },
      ...
    }:
    buildCommand:
    mkDerivation (
      {
        enableParallelBuilding = true;
        inherit buildCommand name;
        passAsFile = [ "buildCommand" ] ++ (derivationArgs.passAsFile or [ ]);
      }
      // builtins.removeAttrs derivationArgs [ "passAsFile" ]
    );

  runCommand =
    name: env:
    runCommandWith {
      inherit name;
      derivationArgs = env;
    };

  writeTextFile =
    {
      name,
      text,
      executable ? false,
      destination ? "",
      checkPhase ? "",
      meta ? { },
      passthru ? { },
      allowSubstitutes ? false,
      preferLocalBuild ? true,
      derivationArgs ? { },
    }:
    mkDerivation (
      {
        inherit
          name
          text
          executable
          checkPhase
          allowSubstitutes
          preferLocalBuild
          meta
          passthru
          ;
        destination = destination;
        passAsFile = [ "text" ] ++ (derivationArgs.passAsFile or [ ]);
        buildCommand = "write the text to $out${destination}";
      }
      // builtins.removeAttrs derivationArgs [ "passAsFile" ]
    );

  writeText = name: text: writeTextFile { inherit name text; };
  writeScript =
    name: text:
    writeTextFile {
      inherit name text;
      executable = true;
    };
  writeShellScript =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      text = "#!${stdenv.shell}/bin/bash\n${text}";
    };
  writeShellScriptBin =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      destination = "/bin/${name}";
      text = "#!${stdenv.shell}/bin/bash\n${text}";
      meta.mainProgram = name;
    };

  writeShellApplication =
    {
      name,
      text,
      runtimeInputs ? [ ],
      runtimeEnv ? null,
      meta ? { },
      passthru ? { },
      checkPhase ? null,
      excludeShellChecks ? [ ],
      extraShellCheckFlags ? [ ],
      bashOptions ? [
        "errexit"
        "nounset"
        "pipefail"
      ],
      inheritPath ? true,
      derivationArgs ? { },
    }:
    writeTextFile {
      inherit name passthru derivationArgs;
      meta = {
        mainProgram = name;
      }
      // meta;
      executable = true;
      destination = "/bin/${name}";
      allowSubstitutes = true;
      preferLocalBuild = false;
      text =
        "#!${stdenv.shell}/bin/bash\n"
        + lib.concatMapStrings (option: "set -o ${option}\n") bashOptions
        + lib.optionalString (runtimeInputs != [ ]) ''
          export PATH="${lib.makeBinPath runtimeInputs}${lib.optionalString inheritPath ":$PATH"}"
        ''
        + "\n"
        + text;
      checkPhase =
        if checkPhase == null then
          "${lib.getExe shellcheck} ${lib.escapeShellArgs (map (c: "--exclude=${c}") excludeShellChecks)} \"$target\""
        else
          checkPhase;
    };

  symlinkJoin =
    {
      name,
      paths,
      preferLocalBuild ? true,
      allowSubstitutes ? false,
      postBuild ? "",
      ...
    }@args:
    runCommand name (
      builtins.removeAttrs args [
        "name"
        "postBuild"
      ]
      // {
        inherit preferLocalBuild allowSubstitutes;
        passAsFile = [ "paths" ];
      }
    ) "lndir each of $paths into $out\n${postBuild}";

  linkFarm =
    name: entries:
    let
      list =
        if builtins.isAttrs entries then
          lib.mapAttrsToList (name: path: { inherit name path; }) entries
        else
          entries;
    in
    runCommand name {
      preferLocalBuild = true;
      allowSubstitutes = false;
      passthru.entries = lib.listToAttrs (map (x: lib.nameValuePair x.name x.path) list);
    } (lib.concatMapStrings (x: "ln -s ${x.path} $out/${x.name}\n") list);

  # Its formal arguments matter: pyproject.nix checks `functionArgs makeSetupHook ? propagatedBuildInputs`.
  makeSetupHook =
    {
      name ? "hook",
      deps ? [ ],
      propagatedBuildInputs ? [ ],
      depsTargetTargetPropagated ? [ ],
      meta ? { },
      passthru ? { },
      substitutions ? { },
    }:
    script:
    runCommand name (
      substitutions
      // {
        inherit meta depsTargetTargetPropagated;
        propagatedBuildInputs = lib.toList deps ++ propagatedBuildInputs;
        strictDeps = true;
        passthru = passthru // {
          provides.setupHook = true;
        };
      }
    ) "substituteAll ${script} $out/nix-support/setup-hook";

  replaceVars =
    src: replacements:
    runCommand (baseNameOf (toString src)) (replacements // { inherit src; }) "substitute $src $out";

  mkShell =
    {
      name ? "nix-shell",
      packages ? [ ],
      inputsFrom ? [ ],
      shellHook ? "",
      ...
    }@attrs:
    mkDerivation (
      builtins.removeAttrs attrs [
        "packages"
        "inputsFrom"
      ]
      // {
        inherit name shellHook;
        nativeBuildInputs = packages ++ (attrs.nativeBuildInputs or [ ]);
        phases = [ "nobuildPhase" ];
        nobuildPhase = "echo 'This derivation is not meant to be built' >&2; exit 1";
      }
    );
in
{
  inherit
    runCommandWith
    runCommand
    writeTextFile
    writeText
    writeScript
    writeShellScript
    writeShellScriptBin
    writeShellApplication
    symlinkJoin
    linkFarm
    makeSetupHook
    replaceVars
    mkShell
    ;
  runCommandLocal =
    name: env:
    runCommand name (
      {
        preferLocalBuild = true;
        allowSubstitutes = false;
      }
      // env
    );
  runCommandCC = runCommand;
}
