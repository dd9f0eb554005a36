//! cudalint: finds the CUDA device code in files and container images and checks that it will
//! run on the GPUs and driver it is meant for.
//!
//! The data's journey, one module per stage, each importing only the ones before it
//! (`tests/it/layering.rs` holds the levels; `scripts/deps.py` prints the graph):
//!
//! - ground floor: [`escape`] (text for terminals and documents), [`digest`] (content digests:
//!   computing, checking, one error), then [`input`] (bytes from files and streams), [`schema`]
//!   (document names, the `tool` stamp), [`knowledge`] (what is known of libraries, loaders,
//!   packages and GPUs, as data) and [`registry`] (an OCI registry client and catalog,
//!   media types, artifact pushes);
//! - [`inspect`]: ELF, fatbin, cubin, PTX and archives, one file at a time;
//! - [`cuda`] (GPUs, toolkits, drivers, the loader's rules) and [`packages`] (wheel, dpkg and
//!   conda records);
//! - [`layer`]: one layer's tar, streamed or read by seeking, into an analysis;
//! - [`cache`] (layer analyses by digest and options) and [`module`] (the CUDA modules of a
//!   file, as the loader sees them);
//! - [`image`]: every image source through one layer pipeline, into an [`image::ImageReport`];
//! - [`device`]: loads the modules on a GPU and compares with the static prediction;
//! - [`lint`]: facts, rules and verdicts; [`report`]: one file per output format;
//!   [`audit`]: a cluster's workloads against its node pools; [`cli`]: the command line.

pub mod audit;
pub mod bounded;
pub mod cache;
pub mod cli;
pub mod cuda;
pub mod device;
pub mod digest;
pub mod escape;
pub mod image;
pub mod input;
pub mod inspect;
pub mod knowledge;
pub mod layer;
pub mod lint;
pub mod module;
pub mod packages;
pub mod registry;
pub mod report;
pub mod schema;
