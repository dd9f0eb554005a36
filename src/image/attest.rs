//! Inventory attestations: `scan --attest` pushes an in-toto statement about an image manifest
//! (its subject) holding the image's inventory and the analysis of each layer; `scan
//! --from-attestation` reads it back and judges the image (for any targets) without pulling a
//! layer. Attached as an OCI referrer: the manifest names the image as `subject`; where the
//! registry does not answer the referrers API (the CNCF distribution registry 2.x), the referrers
//! tag schema's index (`sha256-<hex>` tag) lists it. Format: docs/schema.md.
//!
//! Beside it, `support --attest` (and `scan --attest`) push the image's support matrix as a
//! statement of its own predicate type ([`SUPPORT_PREDICATE_TYPE`]); `support
//! --from-attestation` reads it back ([`read_support`]). The `in-toto.io/predicate-type`
//! annotation of each referrer tells them apart without reading the statements.
//!
//! With `--sign-key` a statement is pushed in a DSSE envelope signed as cosign signs
//! ([`super::sign`]). A reader believes only what its [`Trust`] allows: statements signed by a
//! `--verify-key` (anything else is passed over with a note, and the image is read from its
//! layers when none is left; two signed statements of one cudalint version that disagree are an
//! error), or, behind `--trust-unsigned`, any that parses, as the reports then say. Of those
//! believed, the newest by what the statement says (the cudalint version that made it, then its
//! [`CREATED`] time) is used, never the newest listed: an older one is passed over with a note.

use std::collections::HashMap;

use base64::Engine as _;
use oci_client::Reference;
use reqwest::Method;

use super::sign::{DSSE, Signer, Trust};
use super::{ImageReport, ScanError};
use crate::escape::text as esc;
use crate::layer::AnalyzedLayer;
use crate::layer::budget::mib;
use crate::registry::media::{IN_TOTO, MediaType};
use crate::registry::{self, Artifact, Remote};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://cudalint.dev/attestation/inventory/v1";
/// The support matrix (`cudalint.support/v1`) of the subject.
pub const SUPPORT_PREDICATE_TYPE: &str = "https://cudalint.dev/attestation/support/v1";
const PREDICATE_ANNOTATION: &str = "in-toto.io/predicate-type";
/// The most a statement may be (it holds every layer's analysis).
const MAX_STATEMENT: u64 = 64 << 20;
/// The most a support statement may be (a row per known GPU, a few KiB each at most).
const MAX_SUPPORT_STATEMENT: u64 = 4 << 20;
/// The most an inventory statement's layer entries may decompress to, all together: the bound
/// a layer's own analysis is held to.
const MAX_ENTRIES_DECODED: u64 = 256 << 20;
/// The most they may decompress to per byte they take in the statement (base64 of zstd): an
/// analysis compresses some ten to one, a run of one byte thousands to one.
const MAX_ENTRY_RATIO: u64 = 64;
/// What they may always decompress to (the statements of small images).
const MIN_ENTRIES_DECODED: u64 = 16 << 20;

/// The subject: the image manifest the layers were read from.
pub struct Subject {
    pub repository: String,
    pub digest: String,
    pub size: usize,
    pub media_type: String,
}

/// The statement (JSON bytes). Every layer's analysis goes in as its cache entry (key and body
/// hash inside); a layer whose digest was not verified cannot be attested.
pub fn statement(
    subject: &Subject,
    name: &str,
    variant: &str,
    layers: &[AnalyzedLayer],
    report: &ImageReport,
) -> Result<Vec<u8>, ScanError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut entries = Vec::new();
    for l in layers {
        let e = crate::cache::encode(&l.info.digest, variant, l)
            .map_err(|e| ScanError::Input { what: "attestation".into(), message: e.to_string() })?
            .ok_or_else(|| ScanError::Layer {
                layer: l.info.digest.clone(),
                message: "not verified against its digest: cannot be attested (--verify)".into(),
            })?;
        entries.push(serde_json::json!({"digest": l.info.digest, "entry": b64.encode(e)}));
    }
    let predicate = serde_json::json!({
        "tool": {"name": "cudalint", "version": env!("CARGO_PKG_VERSION")},
        "variant": variant,
        "layers": entries,
        "inventory": report,
    });
    Ok(envelope(subject, name, PREDICATE_TYPE, predicate))
}

/// The support statement (JSON bytes): `support`, the `cudalint.support/v1` document of the
/// subject, is its predicate as it is.
pub fn support_statement(subject: &Subject, name: &str, support: &serde_json::Value) -> Vec<u8> {
    envelope(subject, name, SUPPORT_PREDICATE_TYPE, support.clone())
}

/// An in-toto statement about `subject` (named `name`).
fn envelope(subject: &Subject, name: &str, predicate_type: &str, predicate: serde_json::Value) -> Vec<u8> {
    let (alg, hex) = subject.digest.split_once(':').expect("digests are algorithm:hex");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let st = serde_json::json!({
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {alg: hex}}],
        "predicateType": predicate_type,
        "predicate": predicate,
        CREATED: now,
    });
    serde_json::to_vec(&st).expect("json")
}

/// When the statement was made (seconds since 1970, UTC): an in-toto extension field (a URI, as
/// the statement format allows), inside what is signed. With the version of the cudalint that
/// made it, it orders the statements of an image ([`Order`]).
pub const CREATED: &str = "https://cudalint.dev/attestation/created";

/// How new a statement is by what it says of itself (signed, where a key verified it): the
/// version of the cudalint that made it, then when ([`CREATED`]; none, as older cudalints wrote
/// them, is oldest). Never the order a registry lists them in: whoever can push can list an
/// older statement last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    version: (u32, u32, u32),
    /// A release is newer than its pre-releases (`0.2.0` after `0.2.0-rc.1`).
    release: bool,
    created: Option<u64>,
}

impl Order {
    fn of(statement: &serde_json::Value) -> Order {
        let v = statement.pointer("/predicate/tool/version").and_then(|v| v.as_str()).unwrap_or_default();
        Order {
            version: crate::knowledge::version_key(v),
            release: !v.split('+').next().unwrap_or_default().contains('-'),
            created: statement.get(CREATED).and_then(|c| c.as_u64()),
        }
    }
}

/// The statement as an artifact about `subject` (`annotations`: its predicate type).
fn artifact<'a>(subject: &'a Subject, statement: &'a [u8], annotations: &'a [(&'a str, &'a str)]) -> Artifact<'a> {
    Artifact {
        artifact_type: IN_TOTO,
        payload_type: IN_TOTO,
        payload: statement,
        subject: Some(registry::Subject {
            media_type: &subject.media_type,
            digest: &subject.digest,
            size: subject.size,
        }),
        annotations,
        tag: None,
        label: "attestation manifest",
    }
}

/// Pushes the statement (of `predicate_type`) as a referrer of `subject` (into `remote`'s
/// repository, the subject's), and lists it in the referrers tag schema's index when the
/// registry did not take the subject itself (no `OCI-Subject` in its answer).
/// With a `signer`, the statement goes in a DSSE envelope it signs.
pub fn push(
    remote: &Remote,
    subject: &Subject,
    predicate_type: &str,
    statement: &[u8],
    signer: Option<&Signer>,
) -> Result<String, ScanError> {
    let annotations = [(PREDICATE_ANNOTATION, predicate_type)];
    let sealed = signer.map(|k| k.envelope(IN_TOTO, statement));
    let mut a = artifact(subject, statement, &annotations);
    if let Some(env) = &sealed {
        a.payload_type = DSSE;
        a.payload = env;
    }
    let pushed = remote.push_artifact(&a)?;
    let (digest, size) = (pushed.digest, pushed.size);
    if pushed.subject_indexed {
        return Ok(digest);
    }
    let repo = &subject.repository;
    // Referrers tag schema: read-modify-write of the subject's index (a concurrent writer may
    // drop an entry; the statement itself stays pushed).
    let tag = fallback_tag(&subject.digest);
    let mut index =
        match remote.manifest(&Reference::with_tag(remote.reference.registry().into(), repo.clone(), tag.clone())) {
            Ok((b, _)) => serde_json::from_slice::<serde_json::Value>(&b).unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
    let index_type = MediaType::ImageIndex.to_string();
    if !index.get("manifests").is_some_and(|m| m.is_array()) {
        index = serde_json::json!({"schemaVersion": 2, "mediaType": index_type, "manifests": []});
    }
    let list = index["manifests"].as_array_mut().expect("array");
    list.retain(|d| d.get("digest").and_then(|d| d.as_str()) != Some(digest.as_str()));
    list.push(serde_json::json!({
        "mediaType": MediaType::ImageManifest.to_string(), "digest": digest, "size": size, "artifactType": IN_TOTO,
        "annotations": {PREDICATE_ANNOTATION: predicate_type},
    }));
    remote.send(
        Method::PUT,
        &format!("/v2/{repo}/manifests/{tag}"),
        Some(&index_type),
        serde_json::to_vec(&index).expect("json"),
        &format!("referrers index {tag}"),
    )?;
    Ok(digest)
}

fn fallback_tag(digest: &str) -> String {
    let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    let t = format!("{alg}-{hex}");
    t.chars().take(128).collect()
}

/// The referrers of `digest` with our artifact type and `predicate_type`: the referrers API,
/// else the tag schema.
fn referrers(remote: &Remote, repo: &str, digest: &str, predicate_type: &str) -> Vec<String> {
    let index = match remote.referrers(repo, digest, IN_TOTO) {
        Ok(b) => Some(b),
        Err(_) => remote
            .manifest(&Reference::with_tag(remote.reference.registry().into(), repo.into(), fallback_tag(digest)))
            .ok()
            .map(|(b, _)| b),
    };
    let v: serde_json::Value = index.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let mut out = Vec::new();
    for d in v.get("manifests").and_then(|m| m.as_array()).into_iter().flatten() {
        let ours = d.get("artifactType").and_then(|a| a.as_str()) == Some(IN_TOTO)
            && d.pointer(&format!("/annotations/{}", PREDICATE_ANNOTATION.replace('/', "~1"))).and_then(|a| a.as_str())
                == Some(predicate_type);
        if let (true, Some(m)) = (ours, d.get("digest").and_then(|d| d.as_str())) {
            out.push(m.to_string());
        }
    }
    out
}

/// What a reader took from the attestations of an image: the value of the one it believes
/// (`None`: none, so the image is read as if there were none), and why the others were passed
/// over, for the report's notes.
pub struct Believed<T> {
    pub value: Option<T>,
    pub notes: Vec<String>,
    /// The attestation it came from, and whether a key verified it.
    pub from: Option<super::AttestationUse>,
}

/// The layer analyses (by layer digest) of the attestation of `subject` that `trust` believes:
/// its statement names the subject, and each entry names its own layer, this cudalint's analysis
/// version and these options, and hashes right.
pub fn read(
    remote: &Remote,
    subject: &Subject,
    variant: &str,
    trust: &Trust,
) -> Result<Believed<HashMap<String, AnalyzedLayer>>, ScanError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let kind = Kind {
        predicate_type: PREDICATE_TYPE,
        limit: MAX_STATEMENT,
        what: "cudalint attestation",
        statement: "cudalint inventory statement",
        hint: "`cudalint scan --attest`",
        instead: "its layers were read",
    };
    read_believed(remote, subject, &kind, trust, |predicate| {
        let mut out = HashMap::new();
        let mut print = Vec::new();
        let entries = predicate["layers"].as_array().ok_or("no layers in the predicate")?;
        // All entries together decompress within one bound, and within a multiple of what they
        // take in the statement: a small statement of highly compressed entries (a run of one
        // byte compresses thousands to one) must not take the memory of several layers' analyses.
        let stated: u64 = entries.iter().map(|e| e["entry"].as_str().map_or(0, |s| s.len() as u64)).sum();
        let bound = MAX_ENTRIES_DECODED.min(MIN_ENTRIES_DECODED.max(stated.saturating_mul(MAX_ENTRY_RATIO)));
        let mut left = bound;
        for e in entries {
            let digest = e["digest"].as_str().ok_or("a layer without a digest")?;
            let bytes = b64.decode(e["entry"].as_str().unwrap_or_default()).map_err(|e| e.to_string())?;
            let d = crate::cache::decode_within(&bytes[..], digest, variant, left).ok_or_else(|| {
                format!(
                    "layer {}: made by another cudalint or with other options, altered, or past the {} its entries \
                     may decompress to ({MAX_ENTRY_RATIO} times the {stated} bytes they take here, at least {}, at \
                     most {})",
                    esc(digest),
                    mib(bound),
                    mib(MIN_ENTRIES_DECODED),
                    mib(MAX_ENTRIES_DECODED)
                )
            })?;
            left -= d.size;
            print.push(format!("{digest}={}", d.sha256));
            out.insert(digest.to_string(), d.layer);
        }
        print.sort();
        // Entries decode only for this analyzer and these options: all in one group.
        Ok((out, String::new(), print.join(",")))
    })
}

/// The support matrix (`cudalint.support/v1`, through `parse`) of the support attestation of
/// `subject` that `trust` believes: its statement names the subject and its predicate is a
/// support document this cudalint reads (one `parse` refuses is passed over). Which cudalint
/// made it is the caller's to judge (`tool.version`).
pub fn read_support<T>(
    remote: &Remote,
    subject: &Subject,
    trust: &Trust,
    parse: &dyn Fn(&serde_json::Value) -> Result<T, String>,
) -> Result<Believed<T>, ScanError> {
    let kind = Kind {
        predicate_type: SUPPORT_PREDICATE_TYPE,
        limit: MAX_SUPPORT_STATEMENT,
        what: "cudalint support attestation",
        statement: "cudalint support statement",
        hint: "`cudalint support --attest` or `cudalint scan --attest`",
        instead: "it is judged afresh",
    };
    read_believed(remote, subject, &kind, trust, |predicate| {
        let schema = predicate["schema"].as_str().unwrap_or_default();
        if schema != crate::schema::SUPPORT {
            return Err(format!("its predicate is not a {} document ({})", crate::schema::SUPPORT, esc(schema)));
        }
        // One that this cudalint cannot read is passed over, not believed (it could not be shown).
        let read =
            parse(predicate).map_err(|e| format!("it does not read as this cudalint's support document ({e})"))?;
        // Two versions of cudalint may judge alike images differently: only one version's
        // statements can disagree with each other.
        let version = predicate.pointer("/tool/version").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        Ok((read, version, predicate.to_string()))
    })
}

fn used(statement: &str, signed: bool) -> super::AttestationUse {
    super::AttestationUse { statement: statement.to_string(), signed }
}

/// One kind of statement, for [`read_believed`].
struct Kind {
    predicate_type: &'static str,
    /// The most its statement may be.
    limit: u64,
    /// How messages name the attestation, the statement, and the command that pushes one.
    what: &'static str,
    statement: &'static str,
    hint: &'static str,
    /// What is done where none is believed (under `--verify-key`).
    instead: &'static str,
}

/// One statement read, for [`read_believed`]: what `take` made of it, where it came from and how
/// new it says it is.
struct Candidate<T> {
    value: T,
    group: String,
    print: String,
    manifest: String,
    order: Order,
    version: String,
}

/// The predicate of the attestation of `kind` about `subject` that `trust` believes, through
/// `take` (the value, a group, and a fingerprint: two believed statements of one group with
/// different fingerprints disagree). Each referrer's statement is bounded, verified against its
/// digest, an in-toto statement of the kind's predicate type, and names the subject; under
/// [`Trust::Keys`] it is also signed by a key. Every referrer is read and the newest by what its
/// statement says ([`Order`]: the cudalint version, then the time; the one listed last among
/// equals) is believed, the older ones passed over with a note; under [`Trust::Keys`] one of the
/// newest's group that disagrees with it is an error.
fn read_believed<T>(
    remote: &Remote,
    subject: &Subject,
    kind: &Kind,
    trust: &Trust,
    take: impl Fn(&serde_json::Value) -> Result<(T, String, String), String>,
) -> Result<Believed<T>, ScanError> {
    let (alg, hex) = subject.digest.split_once(':').expect("digests are algorithm:hex");
    let image = format!("{}@{}", esc(&subject.repository), esc(&subject.digest));
    if matches!(trust, Trust::Nothing) {
        return Err(ScanError::Image(format!(
            "{image}: --from-attestation believes only what a key signed: give --verify-key (or --trust-unsigned)"
        )));
    }
    let signed = matches!(trust, Trust::Keys(_));
    let mut why = String::from("none is attached");
    let mut notes = Vec::new();
    let mut found: Vec<Candidate<T>> = Vec::new();
    for m in referrers(remote, &subject.repository, &subject.digest, kind.predicate_type).iter().rev() {
        let r = Reference::with_digest(remote.reference.registry().into(), subject.repository.clone(), m.clone());
        let read = (|| -> Result<Candidate<T>, String> {
            let (mb, _) = remote.manifest(&r).map_err(|e| e.to_string())?;
            let mv: serde_json::Value = serde_json::from_slice(&mb).map_err(|e| e.to_string())?;
            let layer = mv.pointer("/layers/0").ok_or("no statement in the attestation")?;
            if layer.get("size").and_then(|s| s.as_u64()).is_none_or(|s| s > kind.limit) {
                return Err("statement missing or too large".into());
            }
            let d = layer.get("digest").and_then(|d| d.as_str()).ok_or("statement without a digest")?;
            let sealed = layer.get("mediaType").and_then(|t| t.as_str()) == Some(DSSE);
            let sb = remote.small_blob_bounded(d, kind.limit).map_err(|e| e.to_string())?;
            let sb = match (trust, sealed) {
                (Trust::Keys(v), true) => v.open(&sb, IN_TOTO)?,
                (Trust::Keys(_), false) => return Err("it is not signed".into()),
                (_, true) => super::sign::unseal(&sb, IN_TOTO)?.0,
                (_, false) => sb,
            };
            let st: serde_json::Value = serde_json::from_slice(&sb).map_err(|e| e.to_string())?;
            if st["_type"] != STATEMENT_TYPE || st["predicateType"] != kind.predicate_type {
                return Err(format!("not a {}", kind.statement));
            }
            if !st["subject"].as_array().is_some_and(|s| s.iter().any(|s| s["digest"][alg] == hex)) {
                return Err("its statement is about another image".into());
            }
            let (value, group, print) = take(&st["predicate"])?;
            let version = st.pointer("/predicate/tool/version").and_then(|v| v.as_str()).unwrap_or_default();
            Ok(Candidate { value, group, print, manifest: m.clone(), order: Order::of(&st), version: version.into() })
        })();
        match read {
            Ok(c) => found.push(c),
            Err(e) => {
                why = format!("attestation {m}: {}", esc(&e));
                notes.push(format!("{} {} of {image} passed over: {}", kind.what, esc(m), esc(&e)));
            }
        }
    }
    // The newest by what it says; among equals the one listed last (read first).
    let newest = found.iter().enumerate().max_by(|(i, a), (j, b)| a.order.cmp(&b.order).then(j.cmp(i))).map(|(i, _)| i);
    let Some(newest) = newest else {
        if signed {
            notes.push(format!("no signed {} of {image}: {}", kind.what, kind.instead));
            return Ok(Believed { value: None, notes, from: None });
        }
        return Err(ScanError::Image(format!(
            "no usable {} for {image}: {why} (push one with {})",
            kind.what, kind.hint
        )));
    };
    let chosen = found.remove(newest);
    for c in &found {
        if c.print == chosen.print {
            continue;
        }
        if signed && c.group == chosen.group {
            return Err(ScanError::Image(format!(
                "{}: two signed {}s disagree ({} and {}): refusing to choose; remove the wrong one or run without \
                 --from-attestation",
                image,
                kind.what,
                esc(&chosen.manifest),
                esc(&c.manifest)
            )));
        }
        let how = if c.version == chosen.version {
            format!("made no later, by the same cudalint {}", esc(&c.version))
        } else {
            format!("made by cudalint {}, the newer by cudalint {}", esc(&c.version), esc(&chosen.version))
        };
        notes.push(format!(
            "{} {} of {image} passed over for the newer {}: {how}",
            kind.what,
            esc(&c.manifest),
            esc(&chosen.manifest)
        ));
    }
    if !signed {
        notes.push(format!(
            "judged from {} {} that is not checked against a key (--trust-unsigned): whoever can push to {} decided \
             this verdict",
            kind.what,
            esc(&chosen.manifest),
            esc(&subject.repository)
        ));
    }
    Ok(Believed { value: Some(chosen.value), notes, from: Some(used(&chosen.manifest, signed)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_support_statement_is_about_its_subject_and_holds_the_document_as_it_is() {
        let subject = Subject {
            repository: "app/cuda".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            size: 10,
            media_type: MediaType::ImageManifest.to_string(),
        };
        let doc = serde_json::json!({"schema": crate::schema::SUPPORT, "gpus": []});
        let st: serde_json::Value =
            serde_json::from_slice(&support_statement(&subject, "reg/app/cuda:1", &doc)).unwrap();
        assert_eq!(st["_type"], STATEMENT_TYPE);
        assert_eq!(st["predicateType"], SUPPORT_PREDICATE_TYPE);
        assert_eq!(
            st["subject"],
            serde_json::json!([{"name": "reg/app/cuda:1", "digest": {"sha256": "a".repeat(64)}}])
        );
        assert_eq!(st["predicate"], doc);
    }
}
