//! Rules are data: one TOML file each (built-in ones in `rules/`, the user's in `--rules DIR`),
//! with documentation and conditions, messages and fixes written in CEL over the fact objects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

pub use super::error::ConfigError;
use super::error::parse_toml;

include!(concat!(env!("OUT_DIR"), "/builtin_rules.rs"));

/// The CEL environment rules are compiled and evaluated in: the standard library plus the
/// strings (`join`, `lowerAscii` ...), lists and math extensions.
pub static CEL_ENV: std::sync::LazyLock<std::sync::Arc<cel::Env>> = std::sync::LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    env.add_extension(cel::extensions::strings).expect("strings extension");
    env.add_extension(cel::extensions::lists).expect("lists extension");
    env.add_extension(cel::extensions::math).expect("math extension");
    std::sync::Arc::new(env)
});

/// A fresh evaluation context with the rule environment.
pub fn context() -> cel::Context<'static, 'static> {
    cel::Context::with_env(CEL_ENV.clone())
}

crate::schema::words! {
    /// How bad a finding is; `ALL` is weakest first.
    pub enum Severity {
        Info = "info",
        Warning = "warning",
        Error = "error",
    }
}

crate::schema::words! {
    /// What fails the gate (`--fail-on`, `fail-on`): a finding at or above a severity, or
    /// nothing (`never`, for runs that only report, such as an SBOM step).
    pub enum FailOn {
        Info = "info",
        Warning = "warning",
        Error = "error",
        Never = "never",
    }
}

impl FailOn {
    /// As people write it: case ignored, `none` meaning `never`.
    pub fn parse_loose(s: &str) -> Result<FailOn, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(FailOn::Never),
            w => w.parse().map_err(|_| format!("{s:?} is not one of error, warning, info, never (or none)")),
        }
    }

    /// Whether a finding of severity `s` fails the gate.
    pub fn fails(self, s: Severity) -> bool {
        match self {
            FailOn::Info => true,
            FailOn::Warning => s >= Severity::Warning,
            FailOn::Error => s >= Severity::Error,
            FailOn::Never => false,
        }
    }

    /// The weakest severity that makes a target's headline read "fails": errors always (a GPU
    /// an error names does not run the image, whatever the gate), and whatever fails the gate.
    pub fn headline(self) -> Severity {
        match self {
            FailOn::Info => Severity::Info,
            FailOn::Warning => Severity::Warning,
            FailOn::Error | FailOn::Never => Severity::Error,
        }
    }
}

crate::schema::words! {
    /// What a rule is evaluated over, and so which facts it sees (`Scope::variables`, in
    /// lint/variables.rs), by its spelling in rule files.
    pub enum Scope {
        /// Once.
        Image = "image",
        /// Per file with CUDA content.
        Binary = "binary",
        /// Per file and target GPU.
        BinaryTarget = "binary-target",
        /// Per target GPU, for the image as a whole.
        ImageTarget = "image-target",
        /// Per module loaded on a GPU (`--on-device`).
        DeviceModule = "device-module",
        /// Per run-time compiler a consumer resolves (Triton's ptxas, NVRTC) and target GPU.
        CompilerTarget = "compiler-target",
        /// Per thing cudalint may not be able to judge (a run-time compiler check, a kernel
        /// set) and target GPU (lint/unjudged.rs).
        Unjudged = "unjudged",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Docs {
    pub what: String,
    pub why: String,
    pub example: String,
    pub fix: String,
}

/// A case in a rule file: files from fixtures/bin placed in an image, targets, and whether the
/// rule must fire (`tests/rule_cases.rs` runs them all).
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RuleTest {
    /// Kebab-case, unique within the rule (`Rule::parse` checks): the case's test is
    /// `CODE::name`, and its snapshot is named after it.
    #[serde(default)]
    pub name: String,
    pub expect: String,
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub arch: Vec<String>,
    #[serde(default)]
    pub driver: Option<String>,
    #[serde(default)]
    pub cuda_driver: Option<String>,
    #[serde(default)]
    pub env: Vec<String>,
    /// Scan with `--deep` (machine code read: static cudart versions).
    #[serde(default)]
    pub deep: bool,
    /// For `device-module` rules: what the driver did with every module, as if on a GPU.
    #[serde(default)]
    pub device: Option<DeviceCase>,
    /// Text every finding of the rule must contain (for `fire` cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Text every finding's fix must contain (for `fire` cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Small text files in the image (package records: a wheel's `RECORD`, dpkg's `*.list`).
    #[serde(default)]
    pub text: BTreeMap<String, String>,
    /// Instead of an image, a `pylock.toml` judged as one (`WHEEL` and `WHEEL_SHA256` in it stand
    /// for fixtures/lock's demo-kernels 1.0.0 wheel and its sha256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
}

/// A GPU's answer, for rule tests that cannot have one: every module loaded on a device of
/// compute capability `cc` under a driver for `driver_cuda` returned `result` and went `how`.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DeviceCase {
    pub cc: String,
    pub driver_cuda: String,
    pub result: u32,
    pub how: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    code: Spanned<String>,
    name: String,
    severity: Severity,
    scope: Scope,
    summary: String,
    when: Spanned<String>,
    message: Spanned<String>,
    fix: Spanned<String>,
    docs: Docs,
    #[serde(default)]
    test: Vec<Spanned<RuleTest>>,
}

pub struct Rule {
    pub code: String,
    pub name: String,
    pub severity: Severity,
    pub scope: Scope,
    pub summary: String,
    pub docs: Docs,
    pub when_src: String,
    pub tests: Vec<RuleTest>,
    /// `rules/no-kernel-image.toml` or the user's file.
    pub source: String,
    when: cel::Program,
    message: cel::Program,
    fix: cel::Program,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({} {})", self.code, self.name)
    }
}

/// A rule's `when`, `message` or `fix` failed at evaluation (a field the facts lack, a wrong
/// type): the rule is broken, not the image.
#[derive(Debug, Clone, thiserror::Error)]
#[error("rule {code} ({source_file}): {part}: {message}")]
pub struct EvalError {
    pub code: String,
    /// The rule's file.
    pub source_file: String,
    /// `when`, `message` or `fix`.
    pub part: &'static str,
    pub message: String,
}

impl Rule {
    pub fn parse(text: &str, source: &str) -> Result<Rule, ConfigError> {
        let f: RuleFile = parse_toml(text, source)?;
        let compile = |field: &str, s: &Spanned<String>| {
            CEL_ENV.compile(s.get_ref()).map_err(|e| {
                ConfigError::at_offset(
                    source,
                    text,
                    s.span().start,
                    format!("`{field}` is not a valid CEL expression: {e}"),
                )
            })
        };
        let code = f.code.get_ref();
        if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(ConfigError::at_offset(
                source,
                text,
                f.code.span().start,
                format!("code {code:?} must be letters, digits and dashes"),
            ));
        }
        check_test_names(&f.test, text, source)?;
        Ok(Rule {
            when: compile("when", &f.when)?,
            message: compile("message", &f.message)?,
            fix: compile("fix", &f.fix)?,
            when_src: f.when.into_inner(),
            code: f.code.into_inner(),
            name: f.name,
            severity: f.severity,
            scope: f.scope,
            summary: f.summary,
            docs: f.docs,
            tests: f.test.into_iter().map(Spanned::into_inner).collect(),
            source: source.to_string(),
        })
    }

    /// Evaluates the rule in `ctx`: `Some((message, fix))` when it fires.
    pub fn eval(&self, ctx: &cel::Context) -> Result<Option<(String, String)>, EvalError> {
        let err = |part: &'static str, e: &dyn std::fmt::Display| EvalError {
            code: self.code.clone(),
            source_file: self.source.clone(),
            part,
            message: e.to_string(),
        };
        match self.when.execute(ctx).map_err(|e| err("when", &e))? {
            cel::Value::Bool(false) => return Ok(None),
            cel::Value::Bool(true) => {}
            other => return Err(err("when", &format!("evaluates to {other:?}, not a bool"))),
        }
        let text = |p: &cel::Program, what: &'static str| match p.execute(ctx).map_err(|e| err(what, &e))? {
            cel::Value::String(s) => Ok(s.to_string()),
            other => Err(err(what, &format!("evaluates to {other:?}, not a string"))),
        };
        Ok(Some((text(&self.message, "message")?, text(&self.fix, "fix")?)))
    }
}

/// A `[[test]]` case's `name` is kebab-case and unique within the rule: an error at the case's
/// line otherwise. Unnamed cases still load: rule files written before names existed keep working
/// (cudalint never runs a user rule's cases); every built-in case is named (a test checks), since
/// the suite names its tests after them.
fn check_test_names(tests: &[Spanned<RuleTest>], text: &str, source: &str) -> Result<(), ConfigError> {
    const EXPECTED: &str = "a [[test]] case's `name` is kebab-case (lowercase letters and digits, words joined \
                            by single dashes, like `fails-on-l4`) and unique within the rule";
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, t) in tests.iter().enumerate() {
        let at = |message: String| ConfigError::at_offset(source, text, t.span().start, message);
        let name = t.get_ref().name.as_str();
        if name.is_empty() {
            continue;
        }
        let kebab =
            name.split('-').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        if !kebab {
            return Err(at(format!("test name {name:?} is not kebab-case: {EXPECTED}")));
        }
        if let Some(first) = seen.insert(name, i + 1) {
            return Err(at(format!("test name {name:?} is used by cases {first} and {}: {EXPECTED}", i + 1)));
        }
    }
    Ok(())
}

/// The built-in rules, then every `*.toml` in each directory (sorted). Codes must be unique.
pub fn load(dirs: &[std::path::PathBuf]) -> Result<Vec<Rule>, ConfigError> {
    let mut rules = Vec::new();
    for (name, text) in BUILTIN_RULES {
        rules.push(Rule::parse(text, &format!("rules/{name}"))?);
    }
    for d in dirs {
        let mut files: Vec<_> = std::fs::read_dir(d)
            .map_err(|e| ConfigError::at(d.display(), None, e.to_string()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| ConfigError::at(f.display(), None, e.to_string()))?;
            rules.push(Rule::parse(&text, &f.display().to_string())?);
        }
    }
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for r in &rules {
        for key in [&r.code, &r.name] {
            if let Some(other) = seen.insert(key.clone(), r.source.clone()) {
                return Err(ConfigError::at(&r.source, None, format!("rule {key} is already defined in {other}")));
            }
        }
    }
    Ok(rules)
}

/// Markdown documentation page of a rule (docs/rules/CODE.md is generated from this).
pub fn markdown(r: &Rule) -> String {
    format!(
        "# {code} {name}\n\n{summary}\n\nSeverity: **{sev}** · scope: `{scope}` · defined in `{src}`\n\n\
         Fires when: `{when}`\n\n## What it does\n\n{what}\n\n## Why it matters\n\n{why}\n\n## Example\n\n{example}\n\n## Fix\n\n{fix}\n",
        code = r.code,
        name = r.name,
        summary = r.summary,
        sev = r.severity.as_str(),
        scope = r.scope.as_str(),
        src = r.source,
        when = r.when_src.trim(),
        what = r.docs.what.trim(),
        why = r.docs.why.trim(),
        example = r.docs.example.trim(),
        fix = r.docs.fix.trim(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "code = \"X1\"\nname = \"x\"\nseverity = \"error\"\nscope = \"binary\"\nsummary = \"s\"\n\
                        when = 'true'\nmessage = '\"m\"'\nfix = '\"f\"'\n[docs]\nwhat = \"\"\nwhy = \"\"\nexample = \"\"\nfix = \"\"\n";

    fn parse(cases: &str) -> Result<Rule, ConfigError> {
        Rule::parse(&format!("{HEAD}{cases}"), "mine/x.toml")
    }

    #[test]
    fn test_cases_carry_their_names() {
        let r = parse("[[test]]\nname = \"fires-on-l4\"\nexpect = \"fire\"\n[[test]]\nname = \"sm90-passes\"\nexpect = \"pass\"\n")
            .unwrap();
        let names: Vec<_> = r.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fires-on-l4", "sm90-passes"]);
    }

    #[test]
    fn an_unnamed_case_still_loads() {
        // User rule files written before cases had names.
        let r = parse("[[test]]\nname = \"a\"\nexpect = \"fire\"\n\n[[test]]\nexpect = \"pass\"\n").unwrap();
        assert_eq!(r.tests[1].name, "");
    }

    #[test]
    fn a_duplicate_name_is_an_error_at_its_line() {
        let e = parse("[[test]]\nname = \"same\"\nexpect = \"fire\"\n\n[[test]]\nname = \"same\"\nexpect = \"pass\"\n")
            .unwrap_err();
        let s = e.to_string();
        assert_eq!(e.file.as_deref(), Some("mine/x.toml"), "{s}");
        assert!(s.contains("\"same\" is used by cases 1 and 2") && s.contains("kebab-case"), "{s}");
        assert_eq!(e.line, Some(18), "the second case's `[[test]]` line: {s}");
    }

    #[test]
    fn a_name_must_be_kebab_case() {
        for bad in ["Fires", "fires_on_l4", "-x", "x-", "a--b", "on l4"] {
            let e = parse(&format!("[[test]]\nname = {bad:?}\nexpect = \"fire\"\n")).unwrap_err().to_string();
            assert!(e.starts_with("mine/x.toml:") && e.contains("not kebab-case"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_builtin_case_is_named() {
        for r in load(&[]).unwrap() {
            assert!(r.tests.iter().all(|t| !t.name.is_empty()), "{}", r.source);
        }
    }
}
