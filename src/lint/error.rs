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
