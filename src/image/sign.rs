//! Signed attestations: DSSE envelopes (`application/vnd.dsse.envelope.v1+json`) whose signature
//! is ECDSA P-256 with SHA-256 over the envelope's pre-authentication encoding, the format cosign
//! writes for a keyed attestation (`cosign attest --key`) and checks with `cosign
//! verify-attestation --key PUB`. Keys are PEM: an unencrypted P-256 private key, PKCS#8
//! (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`) or SEC1 (`openssl ecparam
//! -genkey -name prime256v1 -noout`), to sign, its SubjectPublicKeyInfo (`openssl pkey -pubout`,
//! or cosign's `cosign.pub`) to verify. The cryptography is ring's.

use std::io::Read;
use std::path::Path;

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, SubjectPublicKeyInfoDer};

/// The most a key file may be (a P-256 key in PEM is a few hundred bytes).
const MAX_KEY_FILE: u64 = 64 << 10;

/// A DER length.
fn der_len(n: usize) -> Vec<u8> {
    match n {
        0..0x80 => vec![n as u8],
        0x80..0x100 => vec![0x81, n as u8],
        _ => vec![0x82, (n >> 8) as u8, n as u8],
    }
}

/// The PKCS#8 PrivateKeyInfo (RFC 5208, 5915) of a SEC1 ECPrivateKey `sec1` on P-256: version 0,
/// id-ecPublicKey with prime256v1, the SEC1 structure as the private key. ring checks the rest
/// (the curve of a `parameters` inside, the public key).
fn sec1_to_pkcs8(sec1: &[u8]) -> Vec<u8> {
    const HEAD: [u8; 24] = [
        0x02, 0x01, 0x00, // version 0
        0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, // id-ecPublicKey
        0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, // prime256v1
    ];
    let mut body = HEAD.to_vec();
    body.push(0x04);
    body.extend(der_len(sec1.len()));
    body.extend_from_slice(sec1);
    let mut out = vec![0x30];
    out.extend(der_len(body.len()));
    out.extend(body);
    out
}

/// The media type of a DSSE envelope.
pub const DSSE: &str = "application/vnd.dsse.envelope.v1+json";

/// The most an envelope may hold besides its payload (signatures, key ids).
const MAX_SIGNATURES: usize = 16;

/// DSSE's pre-authentication encoding: what is signed (the payload type is signed with it).
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut v = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len()).into_bytes();
    v.extend_from_slice(payload);
    v
}

/// A signing key (`--sign-key`).
pub struct Signer {
    key: EcdsaKeyPair,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(ECDSA P-256)")
    }
}

impl Signer {
    /// The key in the PEM file `path`: PKCS#8 (`BEGIN PRIVATE KEY`, `openssl genpkey`) or SEC1
    /// (`BEGIN EC PRIVATE KEY`, `openssl ecparam -genkey`), unencrypted. An encrypted key
    /// (cosign's own or PKCS#8's) is refused saying what to do.
    pub fn from_pem_file(path: &Path) -> Result<Signer, String> {
        let shown = path.display();
        let mut pem = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_KEY_FILE + 1).read_to_end(&mut pem))
            .map_err(|e| format!("{shown}: {e}"))?;
        if pem.len() as u64 > MAX_KEY_FILE {
            return Err(format!("{shown}: over {} KiB: not a key file", MAX_KEY_FILE >> 10));
        }
        let has = |label: &str| memchr::memmem::find(&pem, format!("-----BEGIN {label}-----").as_bytes()).is_some();
        if has("ENCRYPTED SIGSTORE PRIVATE KEY") || has("ENCRYPTED COSIGN PRIVATE KEY") {
            return Err(format!(
                "{shown}: a cosign key, encrypted as only cosign reads it: sign with a plain P-256 key (`openssl \
                 ecparam -genkey -name prime256v1 -noout -out cudalint.key`) and give cosign the same key with \
                 `cosign import-key-pair --key cudalint.key` (docs/trust.md)"
            ));
        }
        if has("ENCRYPTED PRIVATE KEY") {
            return Err(format!(
                "{shown}: an encrypted PKCS#8 key: write it unencrypted (`openssl pkey -in {shown} -out plain.key`) \
                 and keep that file as you keep the password"
            ));
        }
        let der = match PrivateKeyDer::from_pem_slice(&pem) {
            Ok(PrivateKeyDer::Pkcs8(k)) => k.secret_pkcs8_der().to_vec(),
            // ring reads PKCS#8 only: a SEC1 key is the same key in a PKCS#8 wrapping.
            Ok(PrivateKeyDer::Sec1(k)) => sec1_to_pkcs8(k.secret_sec1_der()),
            Ok(_) => return Err(format!("{shown}: an RSA key: cudalint signs with ECDSA P-256 keys")),
            Err(e) => {
                return Err(format!(
                    "{shown}: not a PEM EC private key (\"BEGIN PRIVATE KEY\", PKCS#8, or \"BEGIN EC PRIVATE KEY\", \
                     SEC1): {e}"
                ));
            }
        };
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &rng)
            .map_err(|e| format!("{shown}: not an ECDSA P-256 key ({e})"))?;
        Ok(Signer { key, rng })
    }

    /// The signature (ASN.1 DER) of `payload` of `payload_type`: over its DSSE
    /// pre-authentication encoding, as in an envelope.
    pub fn sign(&self, payload_type: &str, payload: &[u8]) -> Vec<u8> {
        self.key.sign(&self.rng, &pae(payload_type, payload)).expect("ECDSA signing does not fail").as_ref().to_vec()
    }

    /// `payload` in a DSSE envelope signed with this key (JSON bytes).
    pub fn envelope(&self, payload_type: &str, payload: &[u8]) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = self.sign(payload_type, payload);
        serde_json::to_vec(&serde_json::json!({
            "payloadType": payload_type,
            "payload": b64.encode(payload),
            "signatures": [{"keyid": "", "sig": b64.encode(&sig)}],
        }))
        .expect("json")
    }
}

/// The public keys statements must be signed with (`--verify-key`, any of them).
#[derive(Debug, Default)]
pub struct Verifier {
    /// Each key's uncompressed point, and the file it came from.
    keys: Vec<(Vec<u8>, String)>,
}

/// The DER prefix of every P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1, a 66-byte
/// BIT STRING): what follows is the uncompressed point ring verifies with.
const P256_SPKI: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

impl Verifier {
    pub fn from_pem_files(paths: &[std::path::PathBuf]) -> Result<Verifier, String> {
        let mut keys = Vec::new();
        for p in paths {
            let der = SubjectPublicKeyInfoDer::from_pem_file(p)
                .map_err(|e| format!("{}: not a PEM public key (\"BEGIN PUBLIC KEY\"): {e}", p.display()))?;
            let point = der
                .strip_prefix(&P256_SPKI[..])
                .filter(|pt| pt.len() == 65 && pt[0] == 4)
                .ok_or_else(|| format!("{}: not an ECDSA P-256 public key", p.display()))?;
            keys.push((point.to_vec(), p.display().to_string()));
        }
        Ok(Verifier { keys })
    }

    /// Whether one of the keys made `sig` (as [`Signer::sign`] does) of `payload`.
    pub fn verifies(&self, payload_type: &str, payload: &[u8], sig: &[u8]) -> bool {
        let signed = pae(payload_type, payload);
        self.keys
            .iter()
            .any(|(point, _)| UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point).verify(&signed, sig).is_ok())
    }

    /// The payload of a DSSE `envelope` of `payload_type` that one of the keys signed; else why
    /// not.
    pub fn open(&self, envelope: &[u8], payload_type: &str) -> Result<Vec<u8>, String> {
        let (payload, sigs) = unseal(envelope, payload_type)?;
        if sigs.is_empty() {
            return Err("it is not signed".into());
        }
        if sigs.iter().any(|sig| self.verifies(payload_type, &payload, sig)) {
            return Ok(payload);
        }
        Err("its signature does not verify against the --verify-key".into())
    }
}

/// The payload and the signatures of a DSSE envelope, unverified (`--trust-unsigned`, and
/// [`Verifier::open`] before it checks them).
pub fn unseal(envelope: &[u8], payload_type: &str) -> Result<(Vec<u8>, Vec<Vec<u8>>), String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let v: serde_json::Value = serde_json::from_slice(envelope).map_err(|e| format!("not a DSSE envelope: {e}"))?;
    if v["payloadType"] != payload_type {
        return Err("its envelope holds another payload type".into());
    }
    let payload = b64.decode(v["payload"].as_str().unwrap_or_default()).map_err(|e| format!("payload: {e}"))?;
    let mut sigs = Vec::new();
    for s in v["signatures"].as_array().into_iter().flatten().take(MAX_SIGNATURES) {
        if let Some(sig) = s["sig"].as_str().and_then(|s| b64.decode(s).ok()) {
            sigs.push(sig);
        }
    }
    Ok((payload, sigs))
}

/// Which attestations a reader believes (`--verify-key`, `--trust-unsigned`).
#[derive(Debug, Default, Clone)]
pub enum Trust {
    /// None: `--from-attestation` is refused until one of the two is given.
    #[default]
    Nothing,
    /// Only statements signed by one of these keys.
    Keys(std::sync::Arc<Verifier>),
    /// Any statement that parses, signed or not: the reports say so.
    Unsigned,
}

impl Trust {
    /// What this trust believes, for a run's fingerprint: a previous run that believed other
    /// statements may have judged otherwise.
    pub fn fingerprint(&self) -> String {
        match self {
            Trust::Nothing => "none".into(),
            Trust::Unsigned => "unsigned".into(),
            Trust::Keys(v) => {
                let mut points: Vec<&[u8]> = v.keys.iter().map(|(p, _)| p.as_slice()).collect();
                points.sort();
                format!("keys {}", crate::digest::sha256(&points.concat()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    /// `openssl ARGS` in `dir` (the real CLI, as users make their keys).
    fn openssl(dir: &Path, args: &[&str]) {
        let o = std::process::Command::new("openssl").args(args).current_dir(dir).output().unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// The key forms people have: PKCS#8 from `genpkey`, SEC1 from `ecparam -genkey` (with and
    /// without its EC PARAMETERS block) and SEC1 from `openssl ec`; each signs an envelope that
    /// openssl verifies against the key's public half, and that a `Verifier` of it opens.
    #[test]
    fn pkcs8_and_sec1_keys_made_by_openssl_sign_what_openssl_verifies() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        openssl(dir, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "pkcs8.key"]);
        openssl(dir, &["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "sec1.key"]);
        openssl(dir, &["ecparam", "-genkey", "-name", "prime256v1", "-out", "sec1-params.key"]);
        openssl(dir, &["ec", "-in", "pkcs8.key", "-out", "sec1-of-pkcs8.key"]);
        for name in ["pkcs8.key", "sec1.key", "sec1-params.key", "sec1-of-pkcs8.key"] {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            let label = if name == "pkcs8.key" { "BEGIN PRIVATE KEY" } else { "BEGIN EC PRIVATE KEY" };
            assert!(text.contains(label), "{name}: {text}");
            let signer = Signer::from_pem_file(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            openssl(dir, &["ec", "-in", name, "-pubout", "-out", "key.pub"]);
            let payload = b"{\"statement\":1}";
            let sig = signer.sign("application/vnd.in-toto+json", payload);
            std::fs::write(dir.join("pae"), pae("application/vnd.in-toto+json", payload)).unwrap();
            std::fs::write(dir.join("sig"), &sig).unwrap();
            openssl(dir, &["dgst", "-sha256", "-verify", "key.pub", "-signature", "sig", "pae"]);
            let v = Verifier::from_pem_files(&[dir.join("key.pub")]).unwrap();
            let env = signer.envelope("application/vnd.in-toto+json", payload);
            assert_eq!(v.open(&env, "application/vnd.in-toto+json").unwrap(), payload, "{name}");
        }
    }

    /// Keys cudalint cannot sign with are refused, each saying what it is and what to do.
    #[test]
    fn other_curves_rsa_and_encrypted_keys_are_refused_saying_why() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        openssl(dir, &["ecparam", "-genkey", "-name", "secp384r1", "-noout", "-out", "p384.key"]);
        openssl(dir, &["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.key"]);
        openssl(dir, &["rsa", "-in", "rsa.key", "-traditional", "-out", "rsa1.key"]);
        openssl(dir, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "p.key"]);
        openssl(
            dir,
            &["pkcs8", "-topk8", "-in", "p.key", "-v2", "aes-256-cbc", "-passout", "pass:x", "-out", "enc.key"],
        );
        // cosign's own format (scrypt and secretbox inside a PEM block of its own label).
        std::fs::write(
            dir.join("cosign.key"),
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
        )
        .unwrap();
        std::fs::write(dir.join("empty.key"), "").unwrap();
        for (name, says) in [
            ("p384.key", "not an ECDSA P-256 key"),
            ("rsa.key", "not an ECDSA P-256 key"),
            ("rsa1.key", "an RSA key"),
            ("enc.key", "an encrypted PKCS#8 key"),
            ("cosign.key", "cosign import-key-pair --key"),
            ("empty.key", "not a PEM EC private key"),
            ("missing.key", "No such file"),
        ] {
            let e = Signer::from_pem_file(&dir.join(name)).unwrap_err();
            assert!(e.contains(name) && e.contains(says), "{name}: {e}");
        }
    }

    #[test]
    fn an_envelope_verifies_only_with_its_key_and_payload() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let point = ring::signature::KeyPair::public_key(&key).as_ref().to_vec();
        let signer = Signer { key, rng };
        let v = Verifier { keys: vec![(point, "k".into())] };
        let env = signer.envelope("application/vnd.in-toto+json", b"{\"a\":1}");
        assert_eq!(v.open(&env, "application/vnd.in-toto+json").unwrap(), b"{\"a\":1}");
        assert!(v.open(&env, "text/plain").is_err(), "the payload type is signed too");
        let mut forged: serde_json::Value = serde_json::from_slice(&env).unwrap();
        forged["payload"] = base64::engine::general_purpose::STANDARD.encode(b"{\"a\":2}").into();
        let forged = serde_json::to_vec(&forged).unwrap();
        assert!(v.open(&forged, "application/vnd.in-toto+json").unwrap_err().contains("does not verify"));
        assert!(Verifier::default().open(&env, "application/vnd.in-toto+json").is_err(), "no key trusts nothing");
    }
}
