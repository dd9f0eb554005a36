//! One integration test binary (faster to build than one per file), a module per area.

mod cuobjdump;
mod device;
mod fail_closed;
mod images;
mod inspect_cli;
mod inspect_fixtures;
mod inspect_hostile;
mod registry;
mod reports;
mod rules;
mod scan;
mod util;
