//! The knowledge base's named cases (`cases = [...]` of every row in `rules/knowledge/*.toml` and
//! of the run-time compiler consumers), made real: a name and what the row must make of it, or an
//! image (as a rule case builds it) judged with every rule, with the rules that must fire and stay
//! quiet. Run by `tests/rule_cases.rs` as `knowledge::<kind>::<case>`.

use cudalint::cuda::drivers;
use cudalint::inspect::libraries;
use cudalint::knowledge::{self, Case};
use cudalint::lint::rules::{Rule, RuleTest};

/// Every row of every kind: (kind, the row's key, where it was read, its cases).
pub fn rows() -> Vec<(&'static str, String, String, Vec<Case>)> {
    let k = knowledge::get();
    let mut out = Vec::new();
    macro_rules! kind {
        ($name:literal, $rows:expr, $key:expr) => {
            for r in $rows.iter() {
                out.push(($name, $key(&r.row), r.at.clone(), r.cases.clone()));
            }
        };
    }
    kind!("library", k.libraries, |r: &knowledge::Library| r.prefix.clone());
    kind!("sibling", k.siblings, |r: &knowledge::Sibling| r.prefix.clone());
    kind!("framework", k.frameworks, |r: &knowledge::Framework| r.package.clone());
    kind!("build", k.builds, |r: &knowledge::Build| r.key.clone());
    kind!("wheel", k.wheels, |r: &knowledge::Wheel| format!("{} {}", r.component, r.major));
    kind!("related", k.related, |r: &knowledge::Related| r.prefix.clone());
    kind!("runtime", k.runtime, |r: &knowledge::Runtime| r.prefixes.join(" "));
    kind!("env", k.env, |r: &knowledge::Env| r.prefixes.join(" "));
    kind!("gpu_class", k.gpu_classes, |r: &knowledge::GpuClass| r.class.clone());
    kind!("compiler_file", k.compiler_files, |r: &knowledge::CompilerFile| r.key.clone());
    kind!("source_build", k.source_builds, |r: &knowledge::SourceBuild| r.package.clone());
    for (i, c) in cudalint::cuda::toolchains::table().consumer.iter().enumerate() {
        out.push((
            "consumer",
            format!("{} {}", c.package, c.compiler),
            format!("runtime-compilers.toml [[consumer]] #{}", i + 1),
            c.cases.clone(),
        ));
    }
    out
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, want: Option<T>, got: T) -> Result<(), String> {
    match want {
        Some(w) if w != got => Err(format!("{what}: want {w:?}, got {got:?}")),
        _ => Ok(()),
    }
}

/// Checks one case of the row read at `at`.
pub fn check(rules: &[Rule], kind: &str, at: &str, c: &Case) -> Result<(), String> {
    let k = knowledge::get();
    let mut checked = 0;
    if let Some(file) = c.file.as_deref() {
        if kind == "library" && !libraries::matching(file).any(|r| r.at == at) {
            return Err(format!("{file} does not match the row at {at}"));
        }
        expect("cuda library", c.cuda, libraries::is_cuda_library(file))?;
        expect("closed source", c.closed, libraries::closed_source(file))?;
        expect("soname major", c.soname_major, libraries::cuda_major_of_soname(file).unwrap_or(0))?;
        expect("host driver", c.driver, libraries::driver(file).is_some())?;
        expect("loaded on some GPUs only", c.optional, libraries::optional(file))?;
        if let Some(want) = &c.compiler {
            let got = cudalint::inspect::toolchain::kind_of(file).map(|k| k.to_string()).unwrap_or_default();
            expect("run-time compiler", Some(want.clone()), got)?;
        }
        checked += 1;
    }
    if let Some(p) = &c.package {
        expect(
            "related",
            c.related,
            cudalint::packages::cuda_related(p, &cudalint::cuda::toolchains::table().packages()),
        )?;
        expect("vendor", c.vendor, k.vendor_package(p))?;
        expect("runtime", c.runtime, k.runtime_package(p))?;
        expect("CUDA major of the name", c.cuda_major, k.cuda_major_of_name(p).unwrap_or(0))?;
        if kind == "source_build"
            && let Some(says) = &c.says
        {
            let v = k.source_build(p).map(|s| s.variable.clone()).unwrap_or_default();
            if !v.contains(says.as_str()) {
                return Err(format!("{p} builds with {v:?}, not {says:?}"));
            }
        }
        if let (Some(major), Some(says)) = (c.major, &c.says) {
            let b = k.older_build(p, major);
            if !b.contains(says.as_str()) {
                return Err(format!("the CUDA {} build of {p} is {b:?}, which lacks {says:?}", major - 1));
            }
        }
        checked += 1;
    }
    if let (Some(comp), Some(major), Some(says)) = (&c.component, c.major, &c.says) {
        let w = k.wheel(comp, major).ok_or(format!("no {comp} wheel for CUDA {major}"))?;
        if !(w.package.contains(says.as_str()) || w.dir.contains(says.as_str())) {
            return Err(format!("the {comp} wheel for CUDA {major} is {} in {}: no {says:?}", w.package, w.dir));
        }
        checked += 1;
    }
    if let Some(v) = &c.var {
        expect("kept", c.kept, k.env_kept(v))?;
        checked += 1;
    }
    if let Some(g) = &c.gpu {
        if kind == "gpu_class" && !k.gpu_classes.iter().any(|r| r.at == at && r.gpus.iter().any(|x| x == g)) {
            return Err(format!("{g} is not listed in the row at {at}"));
        }
        expect("forward compatibility", c.forward_compat, drivers::forward_compat_supported(g))?;
        checked += 1;
    }
    if !c.files.is_empty() {
        let case = RuleTest {
            name: c.name.clone(),
            expect: "fire".into(),
            files: c.files.clone(),
            text: c.text.clone(),
            env: c.env.clone(),
            gpus: c.gpus.clone(),
            driver: c.driver_version.clone(),
            ..Default::default()
        };
        let report = crate::rule_case::lint(rules, &case);
        for code in &c.fires {
            let fired: Vec<_> = report.findings.iter().filter(|f| &f.rule == code).collect();
            if fired.is_empty() {
                return Err(format!("{code} did not fire; findings: {:#?}", report.findings));
            }
            if let Some(m) = c.message.as_deref().filter(|m| !fired.iter().all(|f| f.message.contains(m))) {
                return Err(format!("a {code} message lacks {m:?}: {fired:#?}"));
            }
            if let Some(m) = c.fix.as_deref().filter(|m| !fired.iter().all(|f| f.fix.contains(m))) {
                return Err(format!("a {code} fix lacks {m:?}: {fired:#?}"));
            }
        }
        for code in &c.quiet {
            let fired: Vec<_> = report.findings.iter().filter(|f| &f.rule == code).collect();
            if !fired.is_empty() {
                return Err(format!("{code} fired, and must not: {fired:#?}"));
            }
        }
        if c.fires.is_empty() && c.quiet.is_empty() {
            return Err("an image case names no rule to fire or stay quiet".into());
        }
        checked += 1;
    }
    if checked == 0 {
        return Err("the case checks nothing (a file, package, wheel, variable, GPU or image)".into());
    }
    Ok(())
}
