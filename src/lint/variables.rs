//! The CEL variables rules see, per scope: the one source of docs/facts.md (`markdown`) and of
//! the bindings `lint::run` fills (one struct per scope). A field's meaning is its doc comment
//! in the fact struct (`schema::documented!`). tests/it/rules.rs fails when a fact object
//! carries an undocumented field, or docs/facts.md differs from `markdown()`.

use super::compilers::CompilerFacts;
use super::coverage::Coverage;
use super::facts::{BinaryFacts, FixFacts, ImageFacts, RuntimeFacts, TargetFacts};
use super::rules::Scope;
use super::unjudged::UnjudgedFacts;
use super::verdict::Deploy;
use crate::device::ModuleResult;
use crate::device::driver::DeviceInfo;
use crate::schema::Field;

/// A variable a rule's `when`, `message` and `fix` can read.
#[derive(Debug)]
pub struct Variable {
    pub name: &'static str,
    /// The heading's note: `this binary on this target`.
    pub note: &'static str,
    pub about: &'static str,
    /// The object's fields with their meaning: the doc comments of its struct's fields.
    pub fields: &'static [Field],
    /// A list whose elements are this variable's objects (`targets` holds `target`s).
    pub list_of: Option<&'static Variable>,
}

pub const IMAGE: Variable =
    Variable { name: "image", note: "", about: "The image as a whole.", fields: ImageFacts::FIELDS, list_of: None };

pub const BINARY: Variable = Variable {
    name: "binary",
    note: "",
    about: "A file with CUDA content.",
    fields: BinaryFacts::FIELDS,
    list_of: None,
};

pub const TARGET: Variable = Variable {
    name: "target",
    note: "",
    about: "A target GPU and the driver it runs under.",
    fields: TargetFacts::FIELDS,
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
    fields: Coverage::FIELDS,
    list_of: None,
};

pub const RUNTIME: Variable = Variable {
    name: "runtime",
    note: "this binary's CUDA runtime on this target",
    about: "Whether the target's driver runs the binary's CUDA runtime.",
    fields: RuntimeFacts::FIELDS,
    list_of: None,
};

pub const FIX: Variable = Variable {
    name: "fix",
    note: "",
    about: "Ready-made remedies for messages and fixes.",
    fields: FixFacts::FIELDS,
    list_of: None,
};

pub const DEPLOY: Variable = Variable {
    name: "deploy",
    note: "image-target scope",
    about: "What decides a target before any kernel runs: the image's driver floor and the GPU's own driver window; and what a lockfile's packages built at install make for it.",
    fields: Deploy::FIELDS,
    list_of: None,
};

pub const MODULE: Variable = Variable {
    name: "module",
    note: "device-module scope",
    about: "What the driver did with one module on one GPU (the `device.modules[]` object of the JSON report).",
    fields: ModuleResult::FIELDS,
    list_of: None,
};

pub const DEVICE: Variable = Variable {
    name: "device",
    note: "device-module scope",
    about: "The GPU.",
    fields: DeviceInfo::FIELDS,
    list_of: None,
};

pub const COMPILER: Variable = Variable {
    name: "compiler",
    note: "compiler-target scope",
    about: "A package that compiles device code at run time, the compiler it resolves (rules/compilers/runtime-compilers.toml), and what that compiler can do for the target.",
    fields: CompilerFacts::FIELDS,
    list_of: None,
};

pub const UNJUDGED: Variable = Variable {
    name: "unjudged",
    note: "unjudged scope",
    about: "Something that decides what runs on the target and that cudalint may not be able to judge (lint/unjudged.rs collects them): a run-time compiler check (not judged where its table cannot decide it), a set of loose kernel files (not judged where none of them is for the GPU); `judged` says which.",
    fields: UnjudgedFacts::FIELDS,
    list_of: None,
};

/// Every variable, in the order docs/facts.md describes them.
pub static ALL: [&Variable; 12] =
    [&IMAGE, &BINARY, &TARGET, &COVERAGE, &RUNTIME, &FIX, &TARGETS, &DEPLOY, &MODULE, &DEVICE, &COMPILER, &UNJUDGED];

impl Scope {
    /// When rules of the scope are evaluated.
    pub fn evaluated(self) -> &'static str {
        match self {
            Scope::Image => "once",
            Scope::Binary => "per file with CUDA content",
            Scope::BinaryTarget => "per such file and target GPU",
            Scope::ImageTarget => "per target GPU, for the image as a whole",
            Scope::DeviceModule => "with `--on-device`, per module loaded and GPU",
            Scope::CompilerTarget => "per installed package that compiles at run time, its compiler and target GPU",
            Scope::Unjudged => {
                "per run-time compiler check and set of loose kernel files, and target GPU (`unjudged.judged`: whether cudalint could judge it there)"
            }
        }
    }
}

/// What rules of one scope are evaluated against: one struct per scope, whose fields are the
/// scope's variables. `lint::run` fills them; `Scope::variables` (and so docs/facts.md) lists
/// the same variables, both made from one list here, so what rules can read is what the docs
/// say.
pub trait Bindings {
    const SCOPE: Scope;
    const VARIABLES: &'static [&'static Variable];
    /// A CEL context with each variable bound by its name.
    fn context(self) -> cel::Context<'static, 'static>;
}

macro_rules! bindings {
    ($($(#[$m:meta])* $name:ident for $scope:ident { $($field:ident: $var:ident),* $(,)? })*) => {
        $(
            $(#[$m])*
            pub struct $name {
                $(pub $field: cel::Value),*
            }
            impl Bindings for $name {
                const SCOPE: Scope = Scope::$scope;
                const VARIABLES: &'static [&'static Variable] = &[$(&$var),*];
                fn context(self) -> cel::Context<'static, 'static> {
                    let mut ctx = super::rules::context();
                    $(ctx.add_variable_from_value($var.name, self.$field);)*
                    ctx
                }
            }
        )*
        impl Scope {
            /// The variables its rules see.
            pub fn variables(self) -> &'static [&'static Variable] {
                match self {
                    $(Scope::$scope => $name::VARIABLES,)*
                }
            }
        }
    };
}

bindings! {
    /// Rules of scope `image`.
    ImageVars for Image { image: IMAGE, targets: TARGETS, fix: FIX }
    /// Rules of scope `binary`.
    BinaryVars for Binary { image: IMAGE, binary: BINARY, fix: FIX }
    /// Rules of scope `binary-target`.
    BinaryTargetVars for BinaryTarget {
        image: IMAGE,
        binary: BINARY,
        target: TARGET,
        coverage: COVERAGE,
        runtime: RUNTIME,
        fix: FIX,
    }
    /// Rules of scope `image-target`.
    ImageTargetVars for ImageTarget { image: IMAGE, target: TARGET, deploy: DEPLOY }
    /// Rules of scope `device-module`.
    DeviceModuleVars for DeviceModule { image: IMAGE, binary: BINARY, module: MODULE, device: DEVICE }
    /// Rules of scope `compiler-target`.
    CompilerTargetVars for CompilerTarget { image: IMAGE, target: TARGET, compiler: COMPILER }
    /// Rules of scope `unjudged`.
    UnjudgedVars for Unjudged { image: IMAGE, target: TARGET, unjudged: UNJUDGED }
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
    for &scope in Scope::ALL {
        let vars: Vec<String> = scope.variables().iter().map(|v| format!("`{}`", v.name)).collect();
        s.push_str(&format!("| `{}` | {} | {} |\n", scope.as_str(), scope.evaluated(), vars.join(", ")));
    }
    s.push_str("\nVersions are strings (`\"12.2\"`); where rules compare them, a `_n` twin holds `major*100+minor`.\n");
    for v in ALL {
        let note = if v.note.is_empty() { String::new() } else { format!(" ({})", v.note) };
        s.push_str(&format!("\n## `{}`{note}\n\n{}\n", v.name, v.about));
        if !v.fields.is_empty() {
            s.push_str("\n| field | meaning |\n|---|---|\n");
            for f in v.fields.iter().filter(|f| !f.skip) {
                s.push_str(&format!("| `{}` | {} |\n", f.name, f.meaning()));
            }
        }
    }
    s
}
