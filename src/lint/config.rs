//! `cudalint.toml` (targets, rule settings, ignores), ignore files and baselines. Errors point
//! at the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::Finding;
use super::rules::{Rule, Severity};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ConfigFile {
    fail_on: Option<Spanned<String>>,
    #[serde(default)]
    targets: TargetsCfg,
    #[serde(default)]
    rules: RulesCfg,
    #[serde(default)]
    ignore: Vec<Spanned<IgnoreEntry>>,
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
    /// Rule code or name.
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
    pub fail_on: Option<Severity>,
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

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str, path: &Path) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(0);
        format!("{}:{line}: {}", path.display(), e.message())
    })
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
) -> Result<Vec<Ignore>, String> {
    let mut out = Vec::new();
    for e in entries {
        let line = line_of(text, e.span().start);
        let at = format!("{}:{line}", path.display());
        let entry = e.into_inner();
        if !rules.iter().any(|r| r.code == entry.rule || r.name == entry.rule) {
            return Err(format!("{at}: ignore names an unknown rule {:?}", entry.rule));
        }
        if entry.reason.trim().is_empty() {
            return Err(format!("{at}: an ignore needs a reason"));
        }
        let glob = match &entry.path {
            Some(p) => Some(
                globset::GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .map_err(|g| format!("{at}: bad path glob {p:?}: {g}"))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let expires = match &entry.expires {
            Some(d) => Some(days_from_civil(d).ok_or_else(|| format!("{at}: expires {d:?} is not a YYYY-MM-DD date"))?),
            None => None,
        };
        out.push(Ignore { entry, glob, expires, origin: at });
    }
    Ok(out)
}

impl Ignore {
    pub fn expired(&self, today: i64) -> bool {
        self.expires.is_some_and(|e| today > e)
    }
    pub fn matches(&self, f: &Finding, rules: &[Rule]) -> bool {
        let rule_ok =
            rules.iter().any(|r| (r.code == self.entry.rule || r.name == self.entry.rule) && r.code == f.rule);
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

pub fn read(path: &Path) -> Result<RawConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: ConfigFile = parse_toml(&text, path)?;
    Ok(RawConfig { file, text, path: path.to_path_buf() })
}

impl RawConfig {
    /// Rule directories the config names (relative to its own directory).
    pub fn rule_dirs(&self) -> Vec<PathBuf> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        self.file.rules.dirs.iter().map(|d| base.join(d)).collect()
    }

    pub fn resolve(self, rules: &[Rule]) -> Result<Config, String> {
        let at = |span: std::ops::Range<usize>| format!("{}:{}", self.path.display(), line_of(&self.text, span.start));
        let known = |name: &str| rules.iter().any(|r| r.code == name || r.name == name);
        let mut cfg = Config { path: Some(self.path.clone()), rule_dirs: self.rule_dirs(), ..Default::default() };
        if let Some(f) = &self.file.fail_on {
            cfg.fail_on = Some(
                Severity::parse(f.get_ref())
                    .ok_or_else(|| format!("{}: fail-on must be error, warning or info", at(f.span())))?,
            );
        }
        for d in &self.file.rules.disable {
            if !known(d.get_ref()) {
                return Err(format!("{}: unknown rule {:?} in [rules] disable", at(d.span()), d.get_ref()));
            }
            cfg.disable.push(d.get_ref().clone());
        }
        for (k, v) in &self.file.rules.severity {
            if !known(k) {
                return Err(format!("{}: unknown rule {k:?} in [rules.severity]", at(v.span())));
            }
            let s = Severity::parse(v.get_ref())
                .ok_or_else(|| format!("{}: severity must be error, warning or info", at(v.span())))?;
            cfg.severity.insert(k.clone(), s);
        }
        let base = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        cfg.targets = self.file.targets.clone();
        cfg.targets.from = cfg.targets.from.iter().map(|f| base.join(f).display().to_string()).collect();
        cfg.ignores = ignore_entries(self.file.ignore, &self.text, &self.path, rules)?;
        Ok(cfg)
    }
}

/// An ignore file (`.cudalintignore.toml`): `[[ignore]]` entries as in `cudalint.toml`.
pub fn read_ignore_file(path: &Path, rules: &[Rule]) -> Result<Vec<Ignore>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: IgnoreFile = parse_toml(&text, path)?;
    ignore_entries(f.ignore, &text, path, rules)
}

#[derive(serde::Serialize, Deserialize)]
pub struct Baseline {
    pub schema: String,
    pub fingerprints: Vec<String>,
}

pub fn read_baseline(path: &Path) -> Result<std::collections::BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let b: Baseline = serde_json::from_str(&text).map_err(|e| format!("{}:{}: {e}", path.display(), e.line()))?;
    if b.schema != crate::schema::BASELINE {
        return Err(format!("{}: not a cudalint baseline (schema {:?})", path.display(), b.schema));
    }
    Ok(b.fingerprints.into_iter().collect())
}

pub fn write_baseline(path: &Path, findings: &[Finding]) -> Result<(), String> {
    let mut fps: Vec<String> = findings.iter().map(|f| f.fingerprint.clone()).collect();
    fps.sort();
    fps.dedup();
    let b = Baseline { schema: crate::schema::BASELINE.into(), fingerprints: fps };
    let mut s = serde_json::to_string_pretty(&b).expect("serializes");
    s.push('\n');
    std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil("1970-01-01"), Some(0));
        assert_eq!(days_from_civil("2000-03-01"), Some(11017));
        assert_eq!(days_from_civil("2026-13-01"), None);
    }
}
