//! One file per subcommand: its clap arguments and the few lines that turn
//! them into library options and call the library.

pub mod diff;
pub mod fold;
pub mod generate;
pub mod nsys;
pub mod process;
pub mod render;
pub mod repl;
pub mod report;
pub mod reprocess;
