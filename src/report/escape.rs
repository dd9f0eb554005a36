//! Escaping lives in [`crate::escape`] (the registry client escapes what registries send, and it
//! sits below report); re-exported here so `report::escape` paths keep working.

pub use crate::escape::*;
