//! One integration test binary (faster to build than one per file), a module per area.

mod cuobjdump;
mod device;
mod images;
mod inspect_cli;
mod inspect_fixtures;
mod inspect_hostile;
mod inspect_layouts;
mod inspect_linkers;
mod registry;
mod reports;
mod rules;
mod scan;
mod util;
