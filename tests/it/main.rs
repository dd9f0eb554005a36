//! One integration test binary (faster to build than one per file), a module per area. The
//! slow tier (`--features slow-tests`, which `scripts/test.sh` and CI turn on) holds the modules
//! that start registries, Chromium or maturin, or read the multi-GB stacks.

mod audit;
#[cfg(feature = "slow-tests")]
mod census;
mod cli;
mod configuration;
mod cuobjdump;
mod cyclonedx;
mod device;
mod dir_packages;
mod escaping;
mod fail_closed;
#[cfg(feature = "slow-tests")]
mod html;
mod images;
mod inspect_cli;
mod inspect_fixtures;
mod inspect_hostile;
mod inspect_layouts;
mod inspect_linkers;
#[cfg(feature = "slow-tests")]
mod install;
mod kernel_sets;
mod knowledge;
#[cfg(feature = "slow-tests")]
mod kubernetes;
mod layer_compression;
mod layer_tar;
mod layering;
#[cfg(feature = "slow-tests")]
mod local_stores;
mod lock;
mod optional_imports;
#[cfg(feature = "slow-tests")]
mod registry;
#[cfg(feature = "slow-tests")]
mod registry_scale;
mod reports;
mod rpm;
mod rules;
mod scan;
#[cfg(feature = "slow-tests")]
mod serve;
#[cfg(feature = "slow-tests")]
mod signing;
mod snippets;
mod steps;
#[cfg(feature = "slow-tests")]
mod stock_stack;
#[cfg(feature = "slow-tests")]
mod stock_stacks_more;
mod support;
mod tar_differential;
#[cfg(feature = "slow-tests")]
mod toolchains;
mod util;
mod verdicts;
mod wheel_differential;
mod wheel_zip;
mod wheels;
