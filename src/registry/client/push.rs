//! Writing to a registry: blob uploads and manifest PUTs (analysis stores, attestations).

use std::sync::atomic::Ordering;

use reqwest::{Method, StatusCode};
use sha2::{Digest as _, Sha256};

use super::{RegistryError, Remote, http};
use crate::escape::text as esc;

impl Remote {
    /// A blob, uploaded monolithically (POST, then PUT with the digest) unless already there.
    pub fn upload(&self, data: &[u8]) -> Result<(), RegistryError> {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(data)));
        let repo = self.reference.repository();
        let what = format!("blob {digest}");
        let head = self.send(Method::HEAD, &format!("/v2/{repo}/blobs/{digest}"), None, Vec::new(), &what);
        if head.is_ok() {
            return Ok(());
        }
        let res = self.send(Method::POST, &format!("/v2/{repo}/blobs/uploads/"), None, Vec::new(), &what)?;
        let loc = res
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| RegistryError::request(&what, "upload started without a Location"))?;
        let mut url = self.inner.base.join(loc).map_err(|e| RegistryError::request(&what, e.to_string()))?;
        if url.host_str() != self.inner.base.host_str() || url.port() != self.inner.base.port() {
            // Credentials go to the registry's own host only.
            return Err(RegistryError::request(&what, format!("upload location {} is on another host", esc(loc))));
        }
        url.query_pairs_mut().append_pair("digest", &digest);
        self.send_url(Method::PUT, url, Some("application/octet-stream"), data.to_vec(), &what)?;
        Ok(())
    }

    pub fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
        what: &str,
    ) -> Result<reqwest::Response, RegistryError> {
        self.send_url(method, self.inner.url(path), content_type, body, what)
    }

    /// One request with the connection's authorization (renewed once on 401); non-success is an
    /// error.
    pub fn send_url(
        &self,
        method: Method,
        url: reqwest::Url,
        content_type: Option<&str>,
        body: Vec<u8>,
        what: &str,
    ) -> Result<reqwest::Response, RegistryError> {
        let inner = &self.inner;
        self.rt.block_on(async {
            let mut renewed = false;
            loop {
                let auth = inner.authorization.lock().expect("auth lock").clone();
                let mut r = inner.http.request(method.clone(), url.clone()).body(body.clone());
                if let Some(a) = &auth {
                    r = r.header(reqwest::header::AUTHORIZATION, a);
                }
                if let Some(c) = content_type {
                    r = r.header(reqwest::header::CONTENT_TYPE, c);
                }
                inner.requests.fetch_add(1, Ordering::Relaxed);
                let res = http::send(r, inner.limits, what)
                    .await
                    .map_err(|e| RegistryError::request(what, esc(&http::error_chain(&e))))?;
                if res.status() == StatusCode::UNAUTHORIZED && !renewed {
                    renewed = true;
                    let a = inner.authenticate().await.map_err(|f| f.error)?;
                    *inner.authorization.lock().expect("auth lock") = a;
                    continue;
                }
                if !res.status().is_success() {
                    return Err(http::status_error(res, inner.limits, what).await);
                }
                return Ok(res);
            }
        })
    }
}
