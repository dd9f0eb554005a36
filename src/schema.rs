//! Names and versions of every JSON document cudalint writes or reads, and the `tool` stamp they
//! carry, [`words!`], which declares the enums whose variants are written as words in them, and
//! [`documented!`], which lists a struct's fields with their doc comments (docs/facts.md).
//! Ground floor: any module may import this, it imports nothing of the crate.
//!
//! A version is bumped on any incompatible change to its document (docs/schema.md).

use serde::Serialize;

/// `cudalint inspect --format json`.
pub const INSPECT: &str = "cudalint.inspect/v1";
/// `cudalint scan --format json` without rules: the image inventory.
pub const SCAN: &str = "cudalint.scan/v1";
/// `cudalint lint` / `scan` with rules, JSON.
pub const LINT: &str = "cudalint.lint/v3";
/// `cudalint audit --format json`.
pub const AUDIT: &str = "cudalint.audit/v1";
/// `--baseline` files.
pub const BASELINE: &str = "cudalint.baseline/v1";
/// `cudalint registry` summaries (and the shard files merged into them).
pub const REGISTRY_SUMMARY: &str = "cudalint.registry-summary/v1";
/// `cudalint support --format json`, and the predicate of support attestations (the same value
/// as `lint::support::SCHEMA`, which the attestation reader below `lint` cannot import).
pub const SUPPORT: &str = "cudalint.support/v1";
/// `cudalint diff --format json`.
pub const DIFF: &str = "cudalint.diff/v1";
/// `cudalint gpus --format json`.
pub const GPUS: &str = "cudalint.gpus/v1";
/// `cudalint rules --format json`.
pub const RULES: &str = "cudalint.rules/v1";
/// `cudalint version --format json`.
pub const VERSION: &str = "cudalint.version/v1";
/// Entries of the layer-analysis cache and store.
pub const LAYER_CACHE: &str = "cudalint.layer-cache/v2";

/// Declares an enum whose variants are written as fixed words (`"n/a"`, `"runs-jit"`): serde,
/// `Display`, `as_str` and `FromStr` all use the one word given per variant, so JSON, CEL values
/// and report text cannot drift apart, and code matches variants instead of comparing strings.
///
/// ```ignore
/// words! {
///     /// The binary's verdict class on a target.
///     pub enum Class { Native = "native", NotApplicable = "n/a" }
/// }
/// ```
macro_rules! words {
    ($(#[$meta:meta])* pub enum $t:ident { $($(#[$vmeta:meta])* $v:ident = $w:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $t {
            $($(#[$vmeta])* #[serde(rename = $w)] $v),*
        }
        impl $t {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$t] = &[$($t::$v),*];
            pub fn as_str(self) -> &'static str {
                match self {
                    $($t::$v => $w),*
                }
            }
        }
        impl $crate::schema::Words for $t {
            const ALL: &'static [$t] = <$t>::ALL;
            fn as_str(self) -> &'static str {
                <$t>::as_str(self)
            }
        }
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }
        impl ::std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($w => Ok($t::$v),)*
                    _ => Err(format!("unknown {}: {s:?}", stringify!($t))),
                }
            }
        }
    };
}
pub(crate) use words;

/// What `words!` gives every enum it declares: its variants and their words, for code that takes
/// any of them (the command line's value parsers).
pub trait Words: Copy + std::str::FromStr<Err = String> + Send + Sync + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
}

/// A field of a document's object, with its doc comment: what it means, written once.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    /// The doc comment, a line at a time.
    pub doc: &'static [&'static str],
    /// `#[serde(skip)]`: never in the document.
    pub skip: bool,
}

impl Field {
    /// The doc comment as one line.
    pub fn meaning(&self) -> String {
        self.doc.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
    }
}

/// Declares a struct (every field `pub`) and its `FIELDS`: each field's name and doc comment, in
/// order, so a document's field list is read from the code instead of written again.
macro_rules! documented {
    (
        $(#[$sm:meta])*
        pub struct $name:ident {
            $($(#[$($fa:tt)*])* pub $field:ident : $fty:ty),* $(,)?
        }
    ) => {
        $(#[$sm])*
        pub struct $name {
            $($(#[$($fa)*])* pub $field: $fty),*
        }
        impl $name {
            /// Its fields and their doc comments, in order.
            pub const FIELDS: &'static [$crate::schema::Field] = &[$($crate::schema::Field {
                name: stringify!($field),
                doc: $crate::schema::doc_lines!(@acc [] $([$($fa)*])*),
                skip: $crate::schema::serde_skip!($([$($fa)*])*),
            }),*];
        }
    };
}
pub(crate) use documented;

/// The `doc` attributes' strings among a field's attributes.
macro_rules! doc_lines {
    (@acc [$($l:literal)*]) => { &[$($l),*] };
    (@acc [$($l:literal)*] [doc = $d:literal] $($rest:tt)*) => { $crate::schema::doc_lines!(@acc [$($l)* $d] $($rest)*) };
    (@acc [$($l:literal)*] [$($other:tt)*] $($rest:tt)*) => { $crate::schema::doc_lines!(@acc [$($l)*] $($rest)*) };
}
pub(crate) use doc_lines;

/// Whether a field's attributes include `#[serde(skip)]`.
macro_rules! serde_skip {
    () => { false };
    ([serde(skip)] $($rest:tt)*) => { true };
    ([$($other:tt)*] $($rest:tt)*) => { $crate::schema::serde_skip!($($rest)*) };
}
pub(crate) use serde_skip;

/// Which program wrote a document.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

impl Tool {
    pub fn current() -> Tool {
        Tool { name: env!("CARGO_PKG_NAME"), version: env!("CARGO_PKG_VERSION") }
    }
}

/// Read back from a document another run wrote (a support attestation): this cudalint's own
/// words are kept as they are; another's (another version) are kept for the process's life (a
/// few bytes, once per document read), and refused past 100 bytes.
impl<'de> serde::Deserialize<'de> for Tool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tool, D::Error> {
        #[derive(serde::Deserialize)]
        struct Owned {
            name: String,
            version: String,
        }
        let o = Owned::deserialize(d)?;
        let keep = |s: String, ours: &'static str| -> Result<&'static str, D::Error> {
            if s == ours {
                Ok(ours)
            } else if s.len() > 100 {
                Err(serde::de::Error::custom("a tool name or version longer than 100 bytes"))
            } else {
                Ok(Box::leak(s.into_boxed_str()))
            }
        };
        Ok(Tool { name: keep(o.name, env!("CARGO_PKG_NAME"))?, version: keep(o.version, env!("CARGO_PKG_VERSION"))? })
    }
}

#[cfg(test)]
mod tests {
    use super::Tool;

    #[test]
    fn a_tool_stamp_reads_back_and_another_versions_is_kept() {
        let ours: Tool = serde_json::from_value(serde_json::to_value(Tool::current()).unwrap()).unwrap();
        assert_eq!((ours.name, ours.version), (env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")));
        let other: Tool = serde_json::from_str(r#"{"name":"cudalint","version":"0.0.1"}"#).unwrap();
        assert_eq!(other.version, "0.0.1");
        let long = format!(r#"{{"name":"cudalint","version":"{}"}}"#, "9".repeat(101));
        assert!(serde_json::from_str::<Tool>(&long).is_err());
    }
}
