//! The registry client (OCI distribution API): references like `registry/repo:tag`,
//! `@sha256:...`, `docker://`, Docker Hub short names; anonymous, bearer-token and basic auth
//! with credentials from `--username`/`--password-stdin`, the environment or Docker's
//! config.json and credential helpers, each sent only to its own registry; manifests, blobs
//! (streamed, resumed, bounded), uploads and listings. It knows nothing of images' contents:
//! `crate::image::remote` reads an image through it, `catalog` lists a registry's images.

pub mod catalog;
mod client;
mod error;
pub mod http;

pub use client::*;
pub use error::RegistryError;
