//! `ch`: the mase-rs command line (the code is in the library, which the Python package shares).

fn main() {
    std::process::exit(mase_cli::run_cli(std::env::args().collect()));
}
