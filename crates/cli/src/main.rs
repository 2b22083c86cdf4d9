//! `ch`: the mase-rs command line.

mod actions;
mod args;
mod config;
mod output;
mod session;
mod tfevents;

use args::{Action, Cli};
use clap::Parser;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
            {
                let _ = e.print();
                std::process::exit(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 });
            }
            // clap explains errors over several lines with usage; keep the first, which names the flag.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("error: bad arguments").trim();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("error: {first} (see `ch --help`)");
            std::process::exit(2);
        }
    };
    let result = match &cli.action {
        Action::Train(a) => actions::train::run(a),
        Action::Test(a) => actions::test::run(a),
        Action::Search(a) => actions::search::run(a),
        Action::Study(a) => actions::study::run(a),
        Action::Transform(a) => actions::transform::run(a),
        Action::Analyze(a) => actions::analyze::run(a),
        Action::Export(a) => actions::export::run(a),
        Action::Info => actions::info::run(),
    };
    if let Err(e) = result {
        eprintln!("error: {}", error_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line. Library errors often quote their source in their own
/// message already (`cannot read model file x.toml: No such file`), so a cause whose text is
/// already on the line is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    config::one_line(&line)
}
