//! `cudalint.toml` (targets, rule settings, ignores), ignore files and baselines. Errors point
//! at the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

pub use super::error::ConfigError;
use super::error::{check_keys, fields, line_of, parse_toml};
use super::report::Finding;
use super::rules::{FailOn, Rule, Severity};

/// An I/O error on `path`.
fn io(path: &Path, e: std::io::Error) -> ConfigError {
    ConfigError::at(path.display(), None, e.to_string())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ConfigFile {
    fail_on: Option<Spanned<String>>,
    /// The scan's memory budget (`--memory`).
    memory: Option<Spanned<String>>,
    #[serde(default)]
    targets: TargetsCfg,
    #[serde(default)]
    rules: RulesCfg,
    #[serde(default)]
    ignore: Vec<Spanned<IgnoreEntry>>,
    #[serde(default)]
    knowledge: KnowledgeCfg,
}

/// `[knowledge] extend = ["ours.toml"]`: knowledge files added to the built-in ones, relative to
/// the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct KnowledgeCfg {
    #[serde(default)]
    extend: Vec<String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TargetsCfg {
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub arch: Vec<String>,
    pub driver: Option<String>,
    pub cuda_driver: Option<String>,
    /// nvidia-smi CSV or Kubernetes node JSON files, relative to the config file.
    #[serde(default)]
    pub from: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RulesCfg {
    #[serde(default)]
    disable: Vec<Spanned<String>>,
    #[serde(default)]
    severity: BTreeMap<String, Spanned<String>>,
    /// Directories of the user's rules, relative to the config file.
    #[serde(default)]
    dirs: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IgnoreEntry {
    /// Rule code or name; `*` is every rule (a path-only entry).
    pub rule: String,
    /// Glob on the file path inside the image (`/opt/legacy/**`); all files when absent.
    pub path: Option<String>,
    /// Target name; all targets when absent.
    pub target: Option<String>,
    pub reason: String,
    /// `YYYY-MM-DD`: the entry stops applying after this day.
    pub expires: Option<String>,
}

#[derive(Debug, Default)]
pub struct Config {
    pub fail_on: Option<FailOn>,
    /// `memory = "512M"`: the scan's memory budget, where `--memory` gives none.
    pub memory: Option<u64>,
    pub targets: TargetsCfg,
    pub disable: Vec<String>,
    pub severity: BTreeMap<String, Severity>,
    pub rule_dirs: Vec<PathBuf>,
    pub ignores: Vec<Ignore>,
    /// Where the config came from (for messages), if anywhere.
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Ignore {
    pub entry: IgnoreEntry,
    glob: Option<globset::GlobMatcher>,
    /// Days since 1970-01-01 of the expiry.
    expires: Option<i64>,
    pub origin: String,
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date (proleptic Gregorian).
pub fn days_from_civil(s: &str) -> Option<i64> {
    let mut it = s.split('-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146097 + doe - 719468)
}

pub fn today() -> i64 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    (secs / 86400) as i64
}

fn ignore_entries(
    entries: Vec<Spanned<IgnoreEntry>>,
    text: &str,
    path: &Path,
    rules: &[Rule],
) -> Result<Vec<Ignore>, ConfigError> {
    entries.into_iter().map(|e| ignore(line_of(text, e.span().start), e.into_inner(), path, rules)).collect()
}

/// One ignore entry, checked, from `path` at `line`.
fn ignore(line: usize, entry: IgnoreEntry, path: &Path, rules: &[Rule]) -> Result<Ignore, ConfigError> {
    let err = |message: String| ConfigError::at(path.display(), Some(line), message);
    if entry.rule != ANY_RULE && !rules.iter().any(|r| r.code == entry.rule || r.name == entry.rule) {
        return Err(err(format!(
            "ignore names an unknown rule {:?} (a rule code or name, `*` for every rule, or a path starting with `/`)",
            entry.rule
        )));
    }
    if entry.rule == ANY_RULE && entry.path.is_none() && entry.target.is_none() {
        // An ignore of everything everywhere would turn the gate off; --fail-on never says that openly.
        return Err(
            err("an ignore of every rule needs a path or a target (use --fail-on never to report only)".into()),
        );
    }
    if entry.reason.trim().is_empty() {
        return Err(err("an ignore needs a reason".into()));
    }
    let glob = match &entry.path {
        Some(p) => Some(
            globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|g| err(format!("bad path glob {p:?}: {g}")))?
                .compile_matcher(),
        ),
        None => None,
    };
    let expires = match &entry.expires {
        Some(d) => Some(days_from_civil(d).ok_or_else(|| err(format!("expires {d:?} is not a YYYY-MM-DD date")))?),
        None => None,
    };
    Ok(Ignore { entry, glob, expires, origin: format!("{}:{line}", path.display()) })
}

/// The rule of an entry that ignores every rule on its path or target.
pub const ANY_RULE: &str = "*";

/// Trivy's `.trivyignore` form, one entry per line: `RULE [PATH-GLOB] [target=NAME]
/// [exp:YYYY-MM-DD]`, or `PATH-GLOB ...` alone (starting with `/`) for every rule there. `#` starts a comment; the comment on an entry's line, else the comment
/// lines just above it, is the entry's reason.
fn ignore_lines(text: &str, path: &Path, rules: &[Rule]) -> Result<Vec<Ignore>, ConfigError> {
    let mut out = Vec::new();
    let mut above: Vec<&str> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let (body, comment) = match raw.split_once('#') {
            Some((b, c)) => (b.trim(), Some(c.trim())),
            None => (raw.trim(), None),
        };
        if body.is_empty() {
            match comment {
                Some(c) if !c.is_empty() => above.push(c),
                _ => above.clear(),
            }
            continue;
        }
        let mut words = body.split_whitespace();
        let first = words.next().expect("a non-empty body has a word").to_string();
        // Paths inside an image are absolute, rule codes and names never start with `/`.
        let (rule, path_first) = match first.starts_with('/') {
            true => (ANY_RULE.to_string(), Some(first)),
            false => (first, None),
        };
        let mut entry = IgnoreEntry { rule, path: path_first, target: None, reason: String::new(), expires: None };
        for w in words {
            let err = |m: String| ConfigError::at(path.display(), Some(line), m);
            if let Some(d) = w.strip_prefix("exp:") {
                entry.expires = Some(d.to_string());
            } else if let Some(t) = w.strip_prefix("target=") {
                entry.target = Some(t.to_string());
            } else if entry.path.is_none() {
                entry.path = Some(w.to_string());
            } else {
                return Err(err(format!(
                    "{w:?}: expected RULE [PATH-GLOB] [target=NAME] [exp:YYYY-MM-DD], or /PATH-GLOB [target=NAME] [exp:YYYY-MM-DD] (a path with spaces needs the TOML form)"
                )));
            }
        }
        entry.reason = match comment.filter(|c| !c.is_empty()) {
            Some(c) => c.to_string(),
            None if !above.is_empty() => above.join(" "),
            None => format!("listed in {}", path.display()),
        };
        above.clear();
        out.push(ignore(line, entry, path, rules)?);
    }
    Ok(out)
}

impl Ignore {
    pub fn expired(&self, today: i64) -> bool {
        self.expires.is_some_and(|e| today > e)
    }
    pub fn matches(&self, f: &Finding, rules: &[Rule]) -> bool {
        let rule_ok = self.entry.rule == ANY_RULE
            || rules.iter().any(|r| (r.code == self.entry.rule || r.name == self.entry.rule) && r.code == f.rule);
        let path_ok = match (&self.glob, &f.path) {
            (None, _) => true,
            (Some(g), Some(p)) => g.is_match(p),
            (Some(_), None) => false,
        };
        let target_ok = self.entry.target.as_ref().is_none_or(|t| f.target.as_deref() == Some(t.as_str()));
        rule_ok && path_ok && target_ok
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IgnoreFile {
    #[serde(default)]
    ignore: Vec<Spanned<IgnoreEntry>>,
}

/// Reads `cudalint.toml`; `rules` is needed to check rule names (and is loaded with the dirs the
/// config names, so this is done in two steps: `read`, then `resolve`).
pub struct RawConfig {
    file: ConfigFile,
    text: String,
    path: PathBuf,
}

/// The keys each table of `cudalint.toml` takes ([`check_keys`]).
fn config_keys(table: &str) -> Option<&'static [&'static str]> {
    match table {
        "" => Some(fields::<ConfigFile>()),
        "targets" => Some(fields::<TargetsCfg>()),
        "rules" => Some(fields::<RulesCfg>()),
        "knowledge" => Some(fields::<KnowledgeCfg>()),
        "ignore" => Some(fields::<IgnoreEntry>()),
        _ => None,
    }
}

/// The keys each table of a TOML ignore file takes.
fn ignore_file_keys(table: &str) -> Option<&'static [&'static str]> {
    match table {
        "" => Some(fields::<IgnoreFile>()),
        "ignore" => Some(fields::<IgnoreEntry>()),
        _ => None,
    }
}

pub fn read(path: &Path) -> Result<RawConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    check_keys(&text, path.display(), config_keys)?;
    let file: ConfigFile = parse_toml(&text, path.display())?;
    Ok(RawConfig { file, text, path: path.to_path_buf() })
}

impl RawConfig {
    /// Rule directories the config names (relative to its own directory).
    pub fn rule_dirs(&self) -> Vec<PathBuf> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        self.file.rules.dirs.iter().map(|d| base.join(d)).collect()
    }

    /// The knowledge files the config's `[knowledge] extend` names (relative to its directory).
    pub fn knowledge_files(&self) -> Vec<PathBuf> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        self.file.knowledge.extend.iter().map(|d| base.join(d)).collect()
    }

    /// The paths the config names (rule directories, target files, knowledge files) exist: a missing one is
    /// reported at its line in the config, resolved against the config's directory, rather than
    /// later as a bare relative path nobody wrote on the command line.
    pub fn check_paths(&self) -> Result<(), ConfigError> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        let named = self.file.rules.dirs.iter().map(|d| ("[rules] dirs", d, true));
        let named = named.chain(self.file.targets.from.iter().map(|f| ("[targets] from", f, false)));
        let named = named.chain(self.file.knowledge.extend.iter().map(|f| ("[knowledge] extend", f, false)));
        for (key, p, dir) in named {
            let full = base.join(p);
            let ok = if dir { full.is_dir() } else { full.is_file() };
            if !ok {
                let line = self.text.find(&format!("\"{p}\"")).map(|at| line_of(&self.text, at));
                let abs = std::path::absolute(&full).unwrap_or(full);
                return Err(ConfigError::at(
                    self.path.display(),
                    line,
                    format!(
                        "{key}: {p:?} is {} (paths in the config are relative to its directory): no such {}",
                        abs.display(),
                        if dir { "directory" } else { "file" }
                    ),
                ));
            }
        }
        Ok(())
    }

    pub fn resolve(self, rules: &[Rule]) -> Result<Config, ConfigError> {
        let at = |span: std::ops::Range<usize>, message: String| {
            ConfigError::at_offset(self.path.display(), &self.text, span.start, message)
        };
        let known = |name: &str| rules.iter().any(|r| r.code == name || r.name == name);
        let mut cfg = Config { path: Some(self.path.clone()), rule_dirs: self.rule_dirs(), ..Default::default() };
        if let Some(f) = &self.file.fail_on {
            cfg.fail_on = Some(
                FailOn::parse_loose(f.get_ref())
                    .map_err(|_| at(f.span(), "fail-on must be error, warning, info or never".into()))?,
            );
        }
        if let Some(m) = &self.file.memory {
            cfg.memory = Some(
                crate::layer::budget::parse_memory(m.get_ref()).map_err(|e| at(m.span(), format!("memory: {e}")))?,
            );
        }
        for d in &self.file.rules.disable {
            if !known(d.get_ref()) {
                return Err(at(d.span(), format!("unknown rule {:?} in [rules] disable", d.get_ref())));
            }
            cfg.disable.push(d.get_ref().clone());
        }
        for (k, v) in &self.file.rules.severity {
            if !known(k) {
                return Err(at(v.span(), format!("unknown rule {k:?} in [rules.severity]")));
            }
            let s = v
                .get_ref()
                .parse::<Severity>()
                .map_err(|_| at(v.span(), "severity must be error, warning or info".into()))?;
            cfg.severity.insert(k.clone(), s);
        }
        let base = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        cfg.targets = self.file.targets.clone();
        cfg.targets.from = cfg.targets.from.iter().map(|f| base.join(f).display().to_string()).collect();
        cfg.ignores = ignore_entries(self.file.ignore, &self.text, &self.path, rules)?;
        Ok(cfg)
    }
}

/// An ignore file: `[[ignore]]` entries as in `cudalint.toml` (a `.toml` file, or one holding
/// such a table), else one entry per line as in Trivy's `.trivyignore` ([`ignore_lines`]).
pub fn read_ignore_file(path: &Path, rules: &[Rule]) -> Result<Vec<Ignore>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let toml = path.extension().is_some_and(|e| e == "toml") || text.lines().any(|l| l.trim() == "[[ignore]]");
    if !toml {
        return ignore_lines(&text, path, rules);
    }
    check_keys(&text, path.display(), ignore_file_keys)?;
    let f: IgnoreFile = parse_toml(&text, path.display())?;
    ignore_entries(f.ignore, &text, path, rules)
}

#[derive(serde::Serialize, Deserialize)]
pub struct Baseline {
    pub schema: String,
    pub fingerprints: Vec<String>,
}

pub fn read_baseline(path: &Path) -> Result<std::collections::BTreeSet<String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let b: Baseline =
        serde_json::from_str(&text).map_err(|e| ConfigError::at(path.display(), Some(e.line()), e.to_string()))?;
    if b.schema != crate::schema::BASELINE {
        return Err(ConfigError::at(path.display(), None, format!("not a cudalint baseline (schema {:?})", b.schema)));
    }
    Ok(b.fingerprints.into_iter().collect())
}

pub fn write_baseline(path: &Path, findings: &[Finding]) -> Result<(), ConfigError> {
    let mut fps: Vec<String> = findings.iter().map(|f| f.fingerprint.clone()).collect();
    fps.sort();
    fps.dedup();
    let b = Baseline { schema: crate::schema::BASELINE.into(), fingerprints: fps };
    let mut s = serde_json::to_string_pretty(&b).expect("serializes");
    s.push('\n');
    std::fs::write(path, s).map_err(|e| io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        super::super::rules::load(&[]).unwrap()
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cudalint.toml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn errors_name_the_file_and_line() {
        // A TOML syntax error: the span becomes the line.
        let (_d, p) = file("fail-on = \"error\"\n[targets\n");
        let e = read(&p).err().unwrap();
        assert_eq!((e.file.clone(), e.line), (Some(p.display().to_string()), Some(2)), "{e}");
        assert!(e.to_string().starts_with(&format!("{}:2: ", p.display())), "{e}");
        // A value the schema accepts but the rules refuse: the line of the value.
        let (_d, p) = file("[rules]\ndisable = [\n  \"CL001\",\n  \"CL999\",\n]\n");
        let e = read(&p).unwrap().resolve(&rules()).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert_eq!(e.message, "unknown rule \"CL999\" in [rules] disable");
        // Ignore entries: the line of the entry.
        let (_d, p) =
            file("[[ignore]]\nrule = \"CL001\"\nreason = \"x\"\n\n[[ignore]]\nrule = \"CL001\"\nreason = \" \"\n");
        let e = read_ignore_file(&p, &rules()).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (Some(5), "an ignore needs a reason"), "{e}");
        // No such file: the file, no line.
        let e = read_baseline(Path::new("/nonexistent/baseline.json")).unwrap_err();
        assert_eq!((e.file.as_deref(), e.line), (Some("/nonexistent/baseline.json"), None));
        assert_eq!(ConfigError::new("m").to_string(), "m");
        assert_eq!(
            ConfigError { file: None, line: Some(3), message: "m".into() }.in_file("t.csv").to_string(),
            "t.csv:3: m"
        );
    }

    #[test]
    fn every_unknown_key_of_every_table_is_named_at_once() {
        let good = "fail-on = \"warning\"\nmemory = \"1G\"\n[targets]\ngpus = [\"H100\"]\narch = []\n\
                    driver = \"550.54.15\"\nfrom = []\n[rules]\ndisable = [\"CL007\"]\ndirs = []\n\
                    [rules.severity]\nCL002 = \"info\"\n[knowledge]\nextend = []\n\
                    [[ignore]]\nrule = \"CL001\"\npath = \"/x\"\ntarget = \"L4\"\nreason = \"r\"\nexpires = \"2030-01-01\"\n";
        let (_d, p) = file(good);
        read(&p).unwrap().resolve(&rules()).unwrap();
        let (_d, p) =
            file("[targets]\ngpu = [\"H100\"]\n[rules]\nseverty = {}\n[[ignore]]\nrule = \"CL001\"\nreasn = \"x\"\n");
        let e = read(&p).err().unwrap();
        assert_eq!(e.line, Some(2), "{e}");
        assert_eq!(
            e.message,
            "3 unknown keys: targets.gpu (line 2; did you mean gpus?), rules.severty (line 4; did you mean \
             severity?), ignore[0].reasn (line 7; did you mean reason?)"
        );
        // An ignore file in TOML is checked the same way.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ignore.toml");
        std::fs::write(&p, "[[ignore]]\nrule = \"CL001\"\nreason = \"x\"\npaths = \"/a\"\n").unwrap();
        let e = read_ignore_file(&p, &rules()).unwrap_err();
        assert_eq!(e.message, "unknown key: ignore[0].paths (line 4; did you mean path?)");
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil("1970-01-01"), Some(0));
        assert_eq!(days_from_civil("2000-03-01"), Some(11017));
        assert_eq!(days_from_civil("2026-13-01"), None);
    }
}
