//! cudalint: finds the CUDA device code in files and container images and checks that it will
//! run on the GPUs and driver it is meant for.
//!
//! The data's journey, one module per stage: [`input`] (bytes from files and streams) ->
//! [`inspect`] (ELF, fatbin, cubin, PTX, archives) -> reports.

pub mod audit;
pub mod cache;
pub mod cli;
pub mod cuda;
pub mod device;
pub mod escape;
pub mod image;
pub mod input;
pub mod inspect;
pub mod layer;
pub mod lint;
pub mod module;
pub mod packages;
pub mod registry;
pub mod report;
pub mod schema;
