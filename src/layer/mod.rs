//! Layer streams: tar walking, compression, per-layer analysis and the merge of layers into
//! the image's final filesystem.

pub mod analyze;
pub mod decode;
pub mod merge;
pub mod path;
pub mod pipe;
pub mod sparse;
pub mod tar;
