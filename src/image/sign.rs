//! Signed attestations: DSSE envelopes (`application/vnd.dsse.envelope.v1+json`) whose signature
//! is ECDSA P-256 with SHA-256 over the envelope's pre-authentication encoding, the format cosign
//! writes for a keyed attestation (`cosign attest --key`) and checks with `cosign
//! verify-attestation --key PUB`. Keys are PEM: a PKCS#8 EC private key (`openssl genpkey
//! -algorithm EC -pkeyopt ec_paramgen_curve:P-256`) to sign, its SubjectPublicKeyInfo (`openssl
//! pkey -pubout`, or cosign's `cosign.pub`) to verify. The cryptography is ring's.

use std::path::Path;

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivatePkcs8KeyDer, SubjectPublicKeyInfoDer};

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
    pub fn from_pem_file(path: &Path) -> Result<Signer, String> {
        let der = PrivatePkcs8KeyDer::from_pem_file(path)
            .map_err(|e| format!("{}: not a PEM PKCS#8 private key (\"BEGIN PRIVATE KEY\"): {e}", path.display()))?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der.secret_pkcs8_der(), &rng)
            .map_err(|e| format!("{}: not an ECDSA P-256 key ({e})", path.display()))?;
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
