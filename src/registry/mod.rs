//! The registry client (OCI distribution API): references like `registry/repo:tag`,
//! `@sha256:...`, `docker://`, Docker Hub short names; anonymous, bearer-token and basic auth
//! with credentials from `--username`/`--password-stdin`, the environment or Docker's
//! config.json and credential helpers, each sent only to its own registry; manifests, blobs
//! (streamed, resumed, bounded), uploads, artifact pushes and listings. It knows nothing of
//! images' contents: `crate::image::remote` reads an image through it, `catalog` lists a
//! registry's images.
//!
//! One file per concern: `options` (what a connection may do), `auth` (credentials, tokens),
//! `client` (connecting, GETs, manifests, listings), `blob` (blob streams), `push` (uploads,
//! artifacts), `media` (media types), `http` (bounded requests, the realm policy), `error`.

mod auth;
mod blob;
pub mod catalog;
mod client;
mod error;
pub mod http;
pub mod media;
mod options;
mod push;
pub mod shard;

pub use auth::{Credentials, credentials};
pub use blob::BlobReader;
pub use client::{MAX_MANIFEST, MAX_MANIFEST_READS, Remote, is_loopback, parse_reference};
pub use error::{RealmRefusal, RegistryError, TokenError};
pub use options::RegistryOptions;
pub use push::{Artifact, Pushed, Subject};
