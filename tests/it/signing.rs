//! Keys and an independent verifier for signed attestations, analyses and summaries: keys made
//! by `openssl genpkey`, signatures checked by `openssl dgst -verify` over a DSSE encoding built
//! here from the DSSE specification (not by cudalint's code).

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;

use crate::scan::which;

/// A P-256 key pair in `dir`: (`NAME.key`, PKCS#8 PEM; `NAME.pub`, SubjectPublicKeyInfo PEM).
pub fn keypair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (key, public) = (dir.join(format!("{name}.key")), dir.join(format!("{name}.pub")));
    let run = |args: &[&str]| {
        let o = Command::new(which("openssl")).args(args).output().unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let k = key.to_str().unwrap();
    run(&["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", k]);
    run(&["pkey", "-in", k, "-pubout", "-out", public.to_str().unwrap()]);
    (key, public)
}

/// DSSE v1's pre-authentication encoding, as its specification writes it.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut v = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len()).into_bytes();
    v.extend_from_slice(payload);
    v
}

/// Whether openssl finds `sig` (DER) a signature by `public` of `payload` as DSSE signs it.
pub fn openssl_verifies(public: &Path, payload_type: &str, payload: &[u8], sig: &[u8]) -> bool {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("pae"), pae(payload_type, payload)).unwrap();
    std::fs::write(d.path().join("sig"), sig).unwrap();
    let o = Command::new(which("openssl"))
        .args(["dgst", "-sha256", "-verify", public.to_str().unwrap(), "-signature", "sig", "pae"])
        .current_dir(d.path())
        .output()
        .unwrap();
    o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Verified OK")
}

/// A DSSE envelope's payload type, payload and first signature, as JSON and base64 hold them.
pub fn open_envelope(envelope: &[u8]) -> (String, Vec<u8>, Vec<u8>) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let v: serde_json::Value = serde_json::from_slice(envelope).unwrap();
    let payload = b64.decode(v["payload"].as_str().unwrap()).unwrap();
    let sig = b64.decode(v["signatures"][0]["sig"].as_str().unwrap()).unwrap();
    (v["payloadType"].as_str().unwrap().to_string(), payload, sig)
}
