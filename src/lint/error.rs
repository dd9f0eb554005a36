//! Errors in what configures the lint (rule files, `cudalint.toml`, ignore files, baselines,
//! target files and specs), and the TOML reading they share.

use serde::Deserialize;

/// A rule file, config, ignore file, baseline or target spec that cannot be used: where (file and
/// line, as far as the format tells) and what. Shown as `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file (or rule source) at fault; `None` for a command-line value.
    pub file: Option<String>,
    /// 1-based line in `file`.
    pub line: Option<usize>,
    pub message: String,
}

impl ConfigError {
    /// A problem with a value given on the command line (no file).
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError { file: None, line: None, message: message.into() }
    }
    pub fn at(file: impl std::fmt::Display, line: Option<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError { file: Some(file.to_string()), line, message: message.into() }
    }
    /// At `offset` (a byte of `text`, as TOML spans give it) in `file`.
    pub fn at_offset(
        file: impl std::fmt::Display,
        text: &str,
        offset: usize,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::at(file, Some(line_of(text, offset)), message)
    }
    /// Names the file a parser that only sees text could not (nvidia-smi CSV, node JSON).
    pub fn in_file(mut self, file: impl std::fmt::Display) -> ConfigError {
        if self.file.is_none() {
            self.file = Some(file.to_string());
        }
        self
    }
    fn render(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f}:{l}: {}", self.message),
            (Some(f), None) => format!("{f}: {}", self.message),
            (None, Some(l)) => format!("line {l}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }
}

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// TOML errors carry a span: it becomes the line.
pub(super) fn parse_toml<T: for<'de> Deserialize<'de>>(
    text: &str,
    file: impl std::fmt::Display,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::at(file, e.span().map(|s| line_of(text, s.start)), e.message()))
}

/// The keys each table of a TOML document takes, by the table's path (`""`, `targets`; array
/// indices left out, so `[[ignore]]` tables are `ignore`): `None` where any key goes
/// (`[rules.severity]`) or the table is not checked.
pub(super) type Schema = fn(&str) -> Option<&'static [&'static str]>;

/// The keys a derived `Deserialize` struct takes, as written in the file (after `rename_all`):
/// serde hands them to `deserialize_struct`, where this deserializer records them and stops. So
/// the known keys are read from the structs, never listed a second time.
pub(super) fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("fields recorded"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut out: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut out));
    out
}

/// Every key of `text` that its table does not take, in one error (serde's
/// `deny_unknown_fields` stops at the first, so a file with three typos took three runs):
/// `file:LINE: 3 unknown keys: targets.gpu (line 2; did you mean gpus?), ...`, at the first.
/// A document that does not parse is left to the typed read, which names the line.
pub(super) fn check_keys(text: &str, file: impl std::fmt::Display, schema: Schema) -> Result<(), ConfigError> {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return Ok(());
    };
    let mut unknown = Vec::new();
    walk(doc.get_ref(), "", "", text, schema, &mut unknown);
    // Tables keep their keys sorted by name; the file's order reads better.
    unknown.sort_by_key(|(line, path, _)| (*line, path.clone()));
    let Some(first) = unknown.first().map(|u| u.0) else {
        return Ok(());
    };
    let listed: Vec<String> = unknown
        .iter()
        .map(|(line, path, hint)| match hint {
            Some(h) => format!("{path} (line {line}; did you mean {h}?)"),
            None => format!("{path} (line {line})"),
        })
        .collect();
    let what = if unknown.len() == 1 { "unknown key".to_string() } else { format!("{} unknown keys", unknown.len()) };
    Err(ConfigError::at(file, Some(first), format!("{what}: {}", listed.join(", "))))
}

/// The unknown keys of `table` (at `path` in the schema, shown as `shown`) and its sub-tables:
/// (line, dotted path, the known key it is closest to).
fn walk(
    table: &toml::de::DeTable,
    path: &str,
    shown: &str,
    text: &str,
    schema: Schema,
    out: &mut Vec<(usize, String, Option<&'static str>)>,
) {
    let known = schema(path);
    for (k, v) in table {
        let key: &str = k.get_ref();
        let join = |base: &str| if base.is_empty() { key.to_string() } else { format!("{base}.{key}") };
        if let Some(known) = known
            && !known.contains(&key)
        {
            out.push((line_of(text, k.span().start), join(shown), closest(key, known)));
            continue;
        }
        match v.get_ref() {
            toml::de::DeValue::Table(t) => walk(t, &join(path), &join(shown), text, schema, out),
            toml::de::DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let toml::de::DeValue::Table(t) = item.get_ref() {
                        walk(t, &join(path), &format!("{}[{i}]", join(shown)), text, schema, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The known key `key` is most likely a typo of: at most 2 edits away (1 for short keys).
fn closest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let most = if key.chars().count() <= 4 { 1 } else { 2 };
    known
        .iter()
        .map(|k| (crate::cuda::gpus::edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= most)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_key_is_named_with_its_path_line_and_nearest_known_key() {
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        #[allow(dead_code)]
        struct Root {
            fail_on: Option<String>,
            inner: Option<Inner>,
            items: Option<Vec<Inner>>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            gpus: Option<Vec<String>>,
        }
        assert_eq!(fields::<Root>(), ["fail-on", "inner", "items"]);
        let schema: Schema = |p| match p {
            "" => Some(fields::<Root>()),
            "inner" | "items" => Some(fields::<Inner>()),
            _ => None,
        };
        let text = "fail_on = \"error\"\n[inner]\ngpu = []\n[[items]]\ngpus = []\n[[items]]\nzzz = 1\n";
        let e = check_keys(text, "c.toml", schema).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        assert_eq!(
            e.message,
            "3 unknown keys: fail_on (line 1; did you mean fail-on?), inner.gpu (line 3; did you mean gpus?), \
             items[1].zzz (line 7)"
        );
        assert!(check_keys("fail-on = \"error\"\n[inner]\ngpus = []\n", "c.toml", schema).is_ok());
        // Not TOML: left to the typed read, which names the line.
        assert!(check_keys("[inner\n", "c.toml", schema).is_ok());
        assert_eq!(
            (
                crate::cuda::gpus::edit_distance("severty", "severity"),
                crate::cuda::gpus::edit_distance("", "ab"),
                crate::cuda::gpus::edit_distance("abc", "abc")
            ),
            (1, 2, 0)
        );
    }
}
