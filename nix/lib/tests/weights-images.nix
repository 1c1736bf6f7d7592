# Unit tests of nix/lib/hf-cache.nix, nix/lib/image-plan.nix and nix/lib/gpu-batteries.nix, builtins
# only: the list of failing cases ([ ] = pass) and their count, for a CPU flake check
# (nix/cpu-checks.nix) and checks/offline/test_image_nix_lib.py. Expected values are written out;
# file hashes are real (builtins.hashString of the stand-in contents).
let
  hf = import ../hf-cache.nix;
  plan = import ../image-plan.nix;
  batteries = import ../gpu-batteries.nix;
  recipe = builtins.fromJSON (builtins.readFile ../../recipes/qwen3.8-27b-exact.json);

  rev = "1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0";
  file = path: content: {
    inherit path;
    size = builtins.stringLength content;
    sha256 = builtins.hashString "sha256" content;
    lfs = false;
  };
  manifest = {
    repo = "Qwen/Qwen3.8-27B";
    revision = rev;
    files = [
      (file ".gitattributes" "*.safetensors filter=lfs")
      (file "config.json" "{}")
      (file "model-00001-of-00002.safetensors" "one")
    ];
  };
  checked = hf.validateManifest {
    inherit manifest;
    repo = manifest.repo;
    revision = rev;
  };
  throws = x: !(builtins.tryEval (builtins.deepSeq x x)).success;

  weights = [
    {
      repo = "b/model";
      revision = rev;
      files = [
        {
          path = "s1";
          size = 6;
        }
        {
          path = "s2";
          size = 5;
        }
        {
          path = "s3";
          size = 4;
        }
      ];
    }
    {
      repo = "a/drafter";
      revision = rev;
      files = [
        {
          path = "d";
          size = 3;
        }
      ];
    }
  ];
  stack = server: plan.layers {
    inherit weights server;
    capBytes = 10;
  };
  weightPart = server: builtins.filter (l: l.kind != "server") (stack server);

  cases = {
    repoFolder = {
      got = hf.repoFolder "incoai/Qwen3.8-27B-DFlash2";
      want = "models--incoai--Qwen3.8-27B-DFlash2";
    };
    manifestFileName = {
      got = hf.manifestFileName "Qwen/Qwen3.8-27B";
      want = "Qwen--Qwen3.8-27B.json";
    };
    badRepoId = {
      got = throws (hf.repoFolder "no-slash");
      want = true;
    };
    url = {
      got = hf.url "Qwen/Qwen3.8-27B" rev "sub dir/a#b.json";
      want = "https://huggingface.co/Qwen/Qwen3.8-27B/resolve/${rev}/sub%20dir/a%23b.json";
    };
    storeNameDotFile = {
      got = hf.storeName "Qwen/Qwen3.8-27B" ".gitattributes";
      want = "hf-Qwen--Qwen3.8-27B--.gitattributes";
    };
    storeNameNested = {
      got = hf.storeName "Qwen/Qwen3.8-27B" "original/params.json";
      want = "hf-Qwen--Qwen3.8-27B--original--params.json";
    };
    storeNameTooLong = {
      got = throws (hf.storeName "Qwen/Qwen3.8-27B" (builtins.concatStringsSep "" (builtins.genList (_: "abcdefghij") 20)));
      want = true;
    };
    validManifestPasses = {
      got = checked == manifest;
      want = true;
    };
    wrongRevisionThrows = {
      got = throws (
        hf.validateManifest {
          inherit manifest;
          repo = manifest.repo;
          revision = "0000000000000000000000000000000000000001";
        }
      );
      want = true;
    };
    absentManifestThrows = {
      got = throws (
        hf.readManifest {
          manifestsDir = ./fixtures + "/no-such-manifests";
          repo = "Qwen/Qwen3.8-27B";
          revision = rev;
        }
      );
      want = true;
    };
    hashArgsHex = {
      got = hf.hashArgs (builtins.hashString "sha256" "");
      want.sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    };
    layoutRefs = {
      got = (hf.cacheLayout [ manifest ]).texts;
      want = [
        {
          target = "models--Qwen--Qwen3.8-27B/refs/main";
          text = rev;
        }
      ];
    };
    layoutFirstLink = {
      got = builtins.head (hf.cacheLayout [ manifest ]).links;
      want = {
        target = "models--Qwen--Qwen3.8-27B/snapshots/${rev}/.gitattributes";
        name = "hf-Qwen--Qwen3.8-27B--.gitattributes";
        repo = "Qwen/Qwen3.8-27B";
        path = ".gitattributes";
      };
    };
    weightGroups = {
      got = map (l: [
        l.repo
        l.paths
        l.bytes
      ]) (plan.weightLayers {
        inherit weights;
        capBytes = 10;
      });
      want = [
        [
          "a/drafter"
          [ "d" ]
          3
        ]
        [
          "b/model"
          [ "s1" ]
          6
        ]
        [
          "b/model"
          [
            "s2"
            "s3"
          ]
          9
        ]
      ];
    };
    weightsIgnoreTheServer = {
      got = weightPart "/nix/store/a-server" == weightPart "/nix/store/b-server";
      want = true;
    };
    weightsBelowTheServer = {
      got = map (l: l.kind) (stack "s");
      want = [
        "weights"
        "weights"
        "weights"
        "hub-cache"
        "server"
      ];
    };
    fileOverCapThrows = {
      got = throws (
        plan.weightLayers {
          inherit weights;
          capBytes = 5;
        }
      );
      want = true;
    };
    labelEngine = {
      got = (plan.labels {
        inherit recipe;
        baked = true;
      })."dev.bitexact.engine";
      want = "sgl-project/sglang@542a043f1b68796d269ef1ee11be7865f8d4a5f1";
    };
    batteryNames = {
      got = map (b: b.name) (batteries.batteries recipe);
      want = [
        "gpu-parity-recipe"
        "gpu-parity-forced-reject"
        "gpu-parity-inflight-8"
        "gpu-parity-long"
        "gpu-repeat"
        "gpu-golden"
        "gpu-capacity-max-running-1"
        "gpu-capacity-max-seqs-32"
        "gpu-capacity-chunked-prefill-4096"
        "gpu-capacity-chunked-prefill-16384"
        "gpu-capacity-cuda-graph-decode-bs-1"
        "gpu-capacity-cuda-graph-decode-bs-32"
        "gpu-radix-cold-warm"
        "gpu-radix-shared-prefix"
        "gpu-radix-long-extend"
        "gpu-radix-inflight-8"
        "gpu-radix-repeat"
        "gpu-radix-golden"
        "gpu-radix-forced-reject"
      ];
    };
  };

  failures = builtins.filter (name: cases.${name}.got != cases.${name}.want) (builtins.attrNames cases);
in
{
  failures = map (name: {
    inherit name;
    inherit (cases.${name}) got want;
  }) failures;
  count = builtins.length (builtins.attrNames cases);
}
