//! One integration test binary (faster to build than one per file), a module per area.

mod audit;
mod cuobjdump;
mod cyclonedx;
mod device;
mod escaping;
mod fail_closed;
mod html;
mod images;
mod inspect_cli;
mod inspect_fixtures;
mod inspect_hostile;
mod inspect_layouts;
mod inspect_linkers;
mod install;
mod layer_tar;
mod layering;
mod registry;
mod registry_scale;
mod reports;
mod rules;
mod scan;
mod stock_stack;
mod toolchains;
mod util;
mod verdicts;
mod wheels;
