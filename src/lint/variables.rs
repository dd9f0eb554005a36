//! The CEL variables rules see, per scope, and what each of their fields means: the one source of
//! docs/facts.md (`markdown`), and of the names `lint::run` binds (it checks them against
//! `Scope::variables`). tests/it/rules.rs fails when a fact object carries a field not described
//! here, or docs/facts.md differs from `markdown()`.

use super::rules::Scope;

/// A variable a rule's `when`, `message` and `fix` can read.
#[derive(Debug)]
pub struct Variable {
    pub name: &'static str,
    /// The heading's note: `this binary on this target`.
    pub note: &'static str,
    pub about: &'static str,
    /// (field, meaning) of the object, in the order the docs list them.
    pub fields: &'static [(&'static str, &'static str)],
    /// A list whose elements are this variable's objects (`targets` holds `target`s).
    pub list_of: Option<&'static Variable>,
}

pub const IMAGE: Variable = Variable {
    name: "image",
    note: "",
    about: "The image as a whole.",
    fields: &[
        ("name", "the image reference or file it was read from, empty if none"),
        ("source", "how it was read: docker-archive, oci-archive, oci, dir, file, wheel"),
        ("platform", "`linux/amd64`, empty if unknown"),
        ("env", "map of the config's CUDA-related environment variables"),
        (
            "cuda_runtime_majors",
            "list of ints: the majors of every CUDA runtime in the image (shared libcudart files and static copies)",
        ),
        ("cuda_runtimes", "list of `version (path)`"),
        ("binaries", "files the scan found with CUDA content"),
        ("binaries_with_device_code", "those that carry device code"),
        ("require_cuda", "`NVIDIA_REQUIRE_CUDA` as set"),
        ("require_cuda_weakest", "the oldest driver CUDA version it admits"),
        ("require_cuda_weakest_n", "the same as `major*100+minor`, 0 when not set"),
        ("needs_cuda", "newest CUDA major the content needs from the driver (runtimes, device code), `13.0`"),
        ("needs_cuda_n", "the same as `major*100+minor`"),
        ("require_arch", "arch constraints found (`NVIDIA_REQUIRE_ARCH`, `arch` in `NVIDIA_REQUIRE_CUDA`)"),
        ("require_arch_uncovered", "known compute capabilities they admit that some binary cannot run on"),
        ("jit_env", "`{force_ptx_jit, disable_ptx_jit}` from `CUDA_FORCE_PTX_JIT` / `CUDA_DISABLE_PTX_JIT`"),
    ],
    list_of: None,
};

pub const BINARY: Variable = Variable {
    name: "binary",
    note: "",
    about: "A file with CUDA content.",
    fields: &[
        ("path", "path inside the image"),
        ("layer", "the layer it comes from (digest or archive path), empty if unknown"),
        ("kind", "shared-object, executable, object, archive, cubin, fatbin, ptx, other"),
        ("loadable", "loaded as is at run time (not an object file or a static archive)"),
        ("soname", "`DT_SONAME`, empty if none"),
        ("symlinks", "links in the image that point at it"),
        ("modules", "modules that count for coverage: kernel-less device-link stubs and relocatable material excluded"),
        ("kernel_less_modules", "device-link stubs without kernels"),
        ("hidden_modules", "hidden fatbin containers (not reached from the registration wrappers)"),
        (
            "library_managed_modules",
            "modules the library loads itself (hidden containers and cubins kept as data): detail only",
        ),
        ("package", "the package that installed the file, empty if none known"),
        ("package_manager", "its manager (`pypi`, `deb`, `conda`)"),
        ("package_version", "its version"),
        (
            "group",
            "what the binary is judged together with: its package, else its Python top-level directory (`site-packages/vllm`), else its directory",
        ),
        (
            "vendor_library",
            "one of NVIDIA's closed-source libraries (cuBLAS, cuDNN, NCCL ...): it cannot be rebuilt, only replaced",
        ),
        ("cuda_major", "the CUDA major it was built with or links (runtime, toolkit notes, PTX ISA), 0 if unknown"),
        ("sass", "SASS architectures, sorted (`[\"sm_80\", \"sm_90a\"]`)"),
        ("ptx", "PTX architectures, sorted (`[\"compute_90\"]`)"),
        ("ptx_portable", "PTX without an 'a'/'f' suffix: what future GPUs can compile"),
        (
            "archs",
            "both lists as one string for messages (`sm_80, sm_90, compute_90`, or `none`); library-managed code is not in them",
        ),
        ("managed_archs", "architectures of library-managed modules (`sm_70, sm_86`), empty if none"),
        ("ptx_bytes", "uncompressed bytes of PTX"),
        ("ptx_isa", "newest PTX ISA carried (`9.0`), empty if none"),
        ("toolkit", "newest CUDA release the device code comes from (PTX ISA, cubin notes), empty if unknown"),
        ("cudart", "`{version, major, minor, linkage, source}` of the CUDA runtime it uses, or null"),
        ("debug", "device code compiled with `-G`"),
        (
            "driver_library",
            "`libcuda`, `libnvidia`, `cuda-compat` when the file belongs to the host driver, else empty",
        ),
        ("cuda_needed", "CUDA libraries in its `DT_NEEDED`"),
        (
            "cuda_sign",
            "the file shows some sign of CUDA (device code, CUDA sections or wrappers, a CUDA `DT_NEEDED`, fatbin magic in a loaded segment)",
        ),
        (
            "problems",
            "what the inspector could not read in full in the code that decides whether the file runs (its own structure, registered containers, a standalone cubin), sorted; empty for driver libraries, archives and objects",
        ),
        ("problem_count", "how many `problems`"),
        ("problem_examples", "the first three `problems`, for messages"),
        (
            "detail_problems",
            "problems in everything else (data the library keeps and loads itself, archive members, driver libraries): detail, never a finding",
        ),
        ("not_loaded", "for a version-selected sibling the loader does not pick: the one it picks (empty otherwise)"),
    ],
    list_of: None,
};

pub const TARGET: Variable = Variable {
    name: "target",
    note: "",
    about: "A target GPU and the driver it runs under.",
    fields: &[
        ("name", "what the user called it: `H100`, `sm_90`, `node-a (NVIDIA A10G)`"),
        ("cc", "compute capability, `\"9.0\"`"),
        ("major", "its major (9)"),
        ("minor", "its minor (0)"),
        ("sm", "as a number (90)"),
        ("driver", "`\"535.104.05\"`, empty if not known"),
        ("driver_cuda", "the driver's CUDA version (`\"12.2\"`), empty if not known"),
        (
            "blocked",
            "an image-level finding fails this target before any kernel runs (driver floor, a driver that cannot drive the GPU): driver-dependent per-binary verdicts step aside, architecture ones say `even with a driver that runs the image`",
        ),
    ],
    list_of: None,
};

pub const TARGETS: Variable = Variable {
    name: "targets",
    note: "image scope",
    about: "The list of `target` objects.",
    fields: &[],
    list_of: Some(&TARGET),
};

pub const COVERAGE: Variable = Variable {
    name: "coverage",
    note: "this binary on this target",
    about: "How the binary's modules fare on the target.",
    fields: &[
        ("modules", "modules that count"),
        ("native", "those with SASS for the target"),
        ("jit", "those that run by compiling PTX"),
        ("failing", "those that do not run: 209, 222 or 223"),
        ("no_image", "no SASS or PTX for it (209)"),
        ("ptx_too_new", "PTX newer than the driver (222)"),
        ("jit_disabled", "only PTX, and JIT disabled (223)"),
        ("arch_specific_only", "failing modules whose only near match is 'a' code for another compute capability"),
        ("arch_specific_images", "those images"),
        ("result", "all, some, none (every / some / no module runs), or n/a (no modules)"),
        ("cells", "the images used (`sm_80`, `jit compute_80`) and the errors, for the matrix"),
        ("native_images", "SASS images used"),
        ("jit_images", "PTX images compiled"),
        ("jit_ptx_bytes", "PTX bytes the driver would compile at first use"),
        ("jit_ptx", "the same for people: `12.3 MiB`"),
        (
            "jit_cost",
            "roughly how long that JIT takes at first use: `milliseconds` (under 1 MiB), `seconds`, `minutes` (64 MiB and more)",
        ),
        ("needs_cuda", "newest CUDA version a JIT or refused PTX needs"),
        ("failing_examples", "a few failing modules, by label"),
        (
            "format_too_new",
            "failing modules whose usable code sits in concatenated entries the target's driver cannot read",
        ),
        ("format_needs_cuda", "the driver CUDA version that can"),
        (
            "expected_missing",
            "modules that are detail in a binary whose other modules run here (not in `failing`, `jit` or `cells`): 'a'/'f' variants for other chips, per-architecture variants, and in NVIDIA's closed libraries kernel sets for newer GPUs only and any module where their registered code runs natively here (their per-GPU dispatch)",
        ),
        (
            "gaps",
            "failing modules built for a generic architecture list that lacks the target while other modules run here: a translation unit built with a different list (never counted in NVIDIA's closed libraries)",
        ),
        ("gap_examples", "a few of them, by label"),
        ("newer_only", "modules whose every plain architecture is newer than the target: kernel sets for newer GPUs"),
        ("class", "the binary's verdict: native, jit, arch-gated, none, n/a (docs/schema.md)"),
        ("gated_for", "for arch-gated binaries: the GPUs its code is for (`H100, H200, GH200`)"),
        ("selected_sibling", "for a version-selected sibling not loaded here: the sibling that is"),
    ],
    list_of: None,
};

pub const RUNTIME: Variable = Variable {
    name: "runtime",
    note: "this binary's CUDA runtime on this target",
    about: "Whether the target's driver runs the binary's CUDA runtime.",
    fields: &[
        ("version", "the runtime the binary uses (`12.9`), empty if unknown"),
        ("needs_driver", "oldest driver that runs it (minor-version compatibility floor of its major)"),
        ("satisfied", "false when the target's declared driver is older than that"),
    ],
    list_of: None,
};

pub const FIX: Variable = Variable {
    name: "fix",
    note: "",
    about: "Ready-made remedies for messages and fixes.",
    fields: &[
        ("torch_arch_list", "smallest list covering every target, `\"8.6;9.0+PTX\"`"),
        ("gencode", "the same as nvcc `-gencode` flags"),
        ("archs", "the architectures it names"),
        ("driver", "the driver the problem at hand needs (PTX 222, runtime 35), when there is one"),
        (
            "action",
            "what to do so this binary runs on the failing targets: the package build to install, or the architecture list to rebuild with (keeping what it carries)",
        ),
    ],
    list_of: None,
};

pub const DEPLOY: Variable = Variable {
    name: "deploy",
    note: "image-target scope",
    about: "What decides a target before any kernel runs: the image's driver floor and the GPU's own driver window.",
    fields: &[
        ("floor_ok", "the target's driver meets the image's floor (or its driver is not known)"),
        (
            "needs_driver",
            "the floor: minor-version compatibility driver of the newest CUDA major the image needs (`580.65.06`)",
        ),
        ("needs_cuda", "that CUDA version"),
        ("why", "what sets the floor: `libcudart.so.13 needed by torch, vllm; CUDA runtime 13.0 (...)`"),
        ("via_compat", "the forward-compatibility libraries that carry the image on this target, if any"),
        ("compat_problem", "why the image's forward-compatibility libraries do not help here (804, old branch)"),
        ("cannot_drive", "why the target's driver cannot drive its GPU at all (empty: it can, or unknown)"),
        ("blocked", "a finding of this scope fails the target before any kernel runs"),
        (
            "unbuildable_major",
            "one cause behind binaries without code here: the CUDA major whose compilers cannot target this GPU (0: none)",
        ),
        ("unbuildable_count", "how many binaries fail here for that cause"),
        ("unbuildable_packages", "their packages (else file names), sorted: `torch, vllm, nvidia-cublas and 3 more`"),
        ("unbuildable_architecture", "the GPU's architecture: `Volta`"),
        ("unbuildable_fix", "the builds to install instead, per package"),
    ],
    list_of: None,
};

pub const MODULE: Variable = Variable {
    name: "module",
    note: "device-module scope",
    about: "What the driver did with one module on one GPU (the `device.modules[]` object of the JSON report).",
    fields: &[
        ("binary", "the file"),
        ("module", "`.nv_fatbin@0x2680`"),
        ("device", "ordinal"),
        ("static_result", "the static verdict: native, jit, no-image, ptx-too-new, jit-disabled"),
        ("static_image", "the image it picks"),
        ("static_error", "the error it predicts (0: loads)"),
        ("driver", "`{result, error, ms, jit_ms, log}` of `cuModuleLoadData` on the whole container"),
        ("how", "native, jit, failed, crashed, unknown"),
        ("entries", "each SASS/PTX image loaded on its own"),
        ("jit_ms", "milliseconds spent compiling PTX"),
        ("functions", "`{name, registers, shared_bytes, local_bytes, max_threads_per_block}`"),
        ("launches", "`{kernel, status, detail}` with `--launch` (absent without)"),
        (
            "loading",
            "how the module reaches the driver in production: registered, standalone, library-managed, driver-library",
        ),
        ("disagrees", "the driver did not do what the static verdict says"),
        ("disagreement", "how"),
    ],
    list_of: None,
};

pub const DEVICE: Variable = Variable {
    name: "device",
    note: "device-module scope",
    about: "The GPU.",
    fields: &[
        ("index", "ordinal"),
        ("name", "`NVIDIA H100 80GB HBM3`"),
        ("cc", "compute capability"),
        ("driver_cuda", "the driver's CUDA version"),
    ],
    list_of: None,
};

pub const COMPILER: Variable = Variable {
    name: "compiler",
    note: "compiler-target scope",
    about: "A package that compiles device code at run time, the compiler it resolves (rules/compilers/runtime-compilers.toml), and what that compiler can do for the target.",
    fields: &[
        ("consumer", "the package that compiles at run time: `vllm`, `torch`, `cupy-cuda12x`"),
        ("consumer_version", "its version"),
        ("what", "what fails when the compiler cannot: `torch.compile / Triton kernels`"),
        ("central", "the package's work goes through this compiler (vLLM, CuPy), rather than one path of several"),
        ("kind", "ptxas, nvrtc"),
        ("path", "the compiler it resolves, in the image"),
        ("version", "its version: `12.8.93`"),
        ("source", "where the version comes from: banner (its own bytes), file-name, package"),
        ("chosen_by", "how it was chosen: `bundled with triton 3.4.0`, `TRITON_PTXAS_PATH`, the loader's order"),
        ("target_arch", "what it is asked to emit for the target: `sm_103a`"),
        ("known", "the table knows this compiler release (else nothing is judged: `why` may say what is missing)"),
        ("knows_target", "it can emit code that runs on the target"),
        ("why", "why not, briefly: `triton 3.4.0's ptxas 12.8 knows no sm_103a`"),
        ("fix", "the smallest change that makes it work (a package release, an environment override)"),
        ("driver_problem", "what the target's driver cannot load of the compiler's output (empty: it can)"),
    ],
    list_of: None,
};

/// Every variable, in the order docs/facts.md describes them.
pub static ALL: [&Variable; 11] =
    [&IMAGE, &BINARY, &TARGET, &COVERAGE, &RUNTIME, &FIX, &TARGETS, &DEPLOY, &MODULE, &DEVICE, &COMPILER];

impl Scope {
    pub const ALL: [Scope; 6] = [
        Scope::Image,
        Scope::Binary,
        Scope::BinaryTarget,
        Scope::ImageTarget,
        Scope::DeviceModule,
        Scope::CompilerTarget,
    ];

    /// Its spelling in rule files.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Image => "image",
            Scope::Binary => "binary",
            Scope::BinaryTarget => "binary-target",
            Scope::ImageTarget => "image-target",
            Scope::DeviceModule => "device-module",
            Scope::CompilerTarget => "compiler-target",
        }
    }

    /// When rules of the scope are evaluated.
    pub fn evaluated(self) -> &'static str {
        match self {
            Scope::Image => "once",
            Scope::Binary => "per file with CUDA content",
            Scope::BinaryTarget => "per such file and target GPU",
            Scope::ImageTarget => "per target GPU, for the image as a whole",
            Scope::DeviceModule => "with `--on-device`, per module loaded and GPU",
            Scope::CompilerTarget => "per installed package that compiles at run time, its compiler and target GPU",
        }
    }

    /// The variables its rules see, in the order `lint::run` binds them.
    pub fn variables(self) -> &'static [&'static Variable] {
        match self {
            Scope::Image => &[&IMAGE, &TARGETS, &FIX],
            Scope::Binary => &[&IMAGE, &BINARY, &FIX],
            Scope::BinaryTarget => &[&IMAGE, &BINARY, &TARGET, &COVERAGE, &RUNTIME, &FIX],
            Scope::ImageTarget => &[&IMAGE, &TARGET, &DEPLOY],
            Scope::DeviceModule => &[&IMAGE, &BINARY, &MODULE, &DEVICE],
            Scope::CompilerTarget => &[&IMAGE, &TARGET, &COMPILER],
        }
    }
}

/// A context for rules of `scope` with `vars` bound. The names must be the scope's variables, in
/// order: what rules can read is what docs/facts.md says.
pub fn context(scope: Scope, vars: Vec<(&'static str, cel::Value)>) -> cel::Context<'static, 'static> {
    let names: Vec<&str> = vars.iter().map(|(n, _)| *n).collect();
    let want: Vec<&str> = scope.variables().iter().map(|v| v.name).collect();
    assert_eq!(names, want, "lint::run binds what Scope::variables says for {}", scope.as_str());
    let mut ctx = super::rules::context();
    for (name, value) in vars {
        ctx.add_variable_from_value(name, value);
    }
    ctx
}

/// docs/facts.md.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Facts rules are written against\n\n\
         <!-- Generated from src/lint/variables.rs: UPDATE_FACTS_DOC=1 cargo test --test it rules:: -->\n\n\
         Rules (`rules/*.toml`, or your own with `--rules DIR`) have a `scope`, which decides when they\n\
         are evaluated and which of these objects their CEL expressions (`when`, `message`, `fix`) see.\n\
         CEL is the Common Expression Language (as in Kubernetes admission policies), with the standard\n\
         library plus the `strings` (`join`, `lowerAscii` ...), `lists` and `math` extensions.\n\n\
         | scope | evaluated | variables |\n|---|---|---|\n",
    );
    for scope in Scope::ALL {
        let vars: Vec<String> = scope.variables().iter().map(|v| format!("`{}`", v.name)).collect();
        s.push_str(&format!("| `{}` | {} | {} |\n", scope.as_str(), scope.evaluated(), vars.join(", ")));
    }
    s.push_str("\nVersions are strings (`\"12.2\"`); where rules compare them, a `_n` twin holds `major*100+minor`.\n");
    for v in ALL {
        let note = if v.note.is_empty() { String::new() } else { format!(" ({})", v.note) };
        s.push_str(&format!("\n## `{}`{note}\n\n{}\n", v.name, v.about));
        if !v.fields.is_empty() {
            s.push_str("\n| field | meaning |\n|---|---|\n");
            for (f, meaning) in v.fields {
                s.push_str(&format!("| `{f}` | {meaning} |\n"));
            }
        }
    }
    s
}
