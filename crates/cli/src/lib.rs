//! `ch`: the mase-rs command line, as a library so that the `ch` binary and the Python
//! package (`mase_rs.cli`) run the same code.

mod actions;
mod args;
mod config;
mod hw_pass;
mod output;
pub mod plugins;
mod session;
mod tfevents;

use args::{Action, Cli};
use clap::Parser;
pub use plugins::{ExternalPasses, Finished, Plugins};

/// Runs `ch` with these arguments (the first is the program name, as in `std::env::args`) and
/// returns the exit status: 0 on success, 1 when the action fails, 2 for bad arguments, 70 for
/// an internal error, 141 (quietly) when the reader of stdout closed it.
pub fn run_cli(args: Vec<String>) -> i32 {
    let finished = run_embedded(args, &Plugins::default(), false);
    if let Some(line) = &finished.error {
        eprintln!("error: {line}");
    }
    finished.status
}

/// Runs `ch` as [`run_cli`] does, with the caller's passes and runners; the error line is
/// returned rather than printed, and with `capture_result` the `--json` result too.
pub fn run_embedded(args: Vec<String>, plugins: &Plugins<'_>, capture_result: bool) -> Finished {
    let saved = capture_result.then(output::start_capture);
    let (status, error) = run_parsed(args, plugins);
    let result = saved.and_then(output::stop_capture);
    Finished { status, error, result: if status == 0 { result } else { None } }
}

/// Parses the arguments and runs the action: the exit status and the error line.
fn run_parsed(args: Vec<String>, plugins: &Plugins<'_>) -> (i32, Option<String>) {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
            {
                let _ = e.print();
                return (if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 }, None);
            }
            if let Some(line) = value_error_line(&e) {
                return (2, Some(line));
            }
            // clap explains errors over several lines with usage; keep the first, which names the flag.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("error: bad arguments").trim();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            return (2, Some(format!("{first} (see `ch --help`)")));
        }
    };
    let action_name = action_name(&cli.action);
    let result = guard(action_name, || match &cli.action {
        Action::Train(a) => actions::train::run(a),
        Action::Test(a) => actions::test::run(a),
        Action::Search(a) => actions::search::run(a, plugins),
        Action::Study(a) => actions::study::run(a),
        Action::Transform(a) => actions::transform::run(a, plugins),
        Action::Analyze(a) => actions::analyze::run(a),
        Action::Export(a) => actions::export::run(a),
        Action::Run(a) => actions::run::run(a),
        Action::Emit(a) => actions::emit::run(a),
        Action::Simulate(a) => actions::simulate::run(a),
        Action::Synth(a) => actions::synth::run(a),
        Action::Info => actions::info::run(),
    });
    match result {
        // The reader of stdout went away (`ch info | head`): stop quietly, as Unix tools do when
        // SIGPIPE ends them (status 128 + 13).
        Err(internal) if closed_stdout(&internal) => (141, None),
        Err(internal) => (70, Some(internal)),
        Ok(Err(e)) => (1, Some(error_line(&e))),
        Ok(Ok(())) => (0, None),
    }
}

/// A flag's value refused by its parser, as `--batch-size -5: expected a positive integer`
/// (clap's own line quotes the flag's value name and the value in a longer sentence).
fn value_error_line(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let ContextValue::String(arg) = e.get(ContextKind::InvalidArg)? else { return None };
    let ContextValue::String(value) = e.get(ContextKind::InvalidValue)? else { return None };
    let reason = std::error::Error::source(e)?.to_string();
    let flag = arg.split(' ').next().unwrap_or(arg);
    Some(format!("{flag} {value}: {reason} (see `ch --help`)"))
}

/// Whether a panic's message is Rust's `println!` failing because stdout's reader closed it.
fn closed_stdout(panic_message: &str) -> bool {
    panic_message.contains("failed printing to stdout") && panic_message.contains("Broken pipe")
}

/// The subcommand's name, for messages about the action as a whole.
fn action_name(action: &Action) -> &'static str {
    match action {
        Action::Train(_) => "train",
        Action::Test(_) => "test",
        Action::Search(_) => "search",
        Action::Study(_) => "study",
        Action::Transform(_) => "transform",
        Action::Analyze(_) => "analyze",
        Action::Export(_) => "export",
        Action::Run(_) => "run",
        Action::Emit(_) => "emit",
        Action::Simulate(_) => "simulate",
        Action::Synth(_) => "synth",
        Action::Info => "info",
    }
}

/// Runs an action so that a panic (a bug: bad input is an error, never a panic) ends the action
/// with one line, returned as `Err` (exit status 70), instead of a backtrace. The panic hook only records the
/// message and place; `catch_unwind` sees panics of the main thread and those that rayon and
/// scoped threads pass back to it.
fn guard(action: &str, run: impl FnOnce() -> anyhow::Result<()>) -> Result<anyhow::Result<()>, String> {
    use std::sync::Mutex;
    static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
    std::panic::set_hook(Box::new(|info| {
        let message = panic_text(info.payload());
        let place = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(format!("{message}{place}"));
        }
    }));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Test hook: lets the tests prove that a panic inside an action becomes one line.
        if std::env::var("MASE_FAILPOINT").is_ok_and(|p| p.trim() == "panic-in-action") {
            panic!("failpoint panic-in-action");
        }
        run()
    }));
    match outcome {
        Ok(result) => Ok(result),
        Err(payload) => {
            let recorded = LAST_PANIC.lock().ok().and_then(|mut l| l.take());
            let message = recorded.unwrap_or_else(|| panic_text(&*payload));
            Err(format!("internal error in {action}: {}; please report", config::one_line(&message)))
        }
    }
}

/// The text of a panic's payload (`panic!` with a literal or with formatting).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// The error and its causes on one line. Library errors quote their source in their own
/// message already (`cannot read model file x.toml: No such file`), some only its first or last
/// line (TOML's and the regex crate's errors span several), so a cause whose text, or whose
/// first or last line, is already on the line is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let (first, last) = (lines.next().unwrap_or_default(), lines.next_back().unwrap_or_default());
        if line.contains(&text) || (!first.is_empty() && line.contains(first)) || (!last.is_empty() && line.contains(last)) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    config::one_line(&line)
}
