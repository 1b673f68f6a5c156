//! `ringmq-bench`: a lean RocketMQ-protocol benchmark client built on ringmq's remoting codec.
//! It drives ringmq or any RocketMQ-compatible broker through a name server address (loopback
//! only), and can itself be an `echo-server` (the ceiling of this client on this machine).
//!
//! Kinds: `producer`, `consumer`, `e2e`, `catchup`, `echo-server`, and `summary` (Markdown
//! table of JSON reports). See `ringmq-bench --help` and docs/BENCHMARKS.md.

mod args;
mod bounds;
mod cli;
mod client;
mod consumer;
mod echo;
mod echo_clients;
mod echo_threads;
mod echo_workers;
mod error;
mod kinds;
mod procstat;
mod producer;
mod record;
mod report;
mod stats;

#[cfg(test)]
mod smoke_tests;

use std::process::ExitCode;

use clap::CommandFactory;

use args::{Args, Kind, Parsed};
use error::BenchError;

fn main() -> ExitCode {
    let args = match args::parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            // No kind given: the usage, as a successful run (as before clap).
            let _ = cli::Cli::command().print_help();
            return ExitCode::SUCCESS;
        }
        Err(error) => return command_line_error(&error),
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("ringmq-bench: {error}");
            ExitCode::from(1)
        }
    }
}

/// `--help` goes to stdout and succeeds. A bad command line says why on stderr, prefixed like
/// every other failure of the tool (scripts grep for it), and exits 2: a usage error.
fn command_line_error(error: &clap::Error) -> ExitCode {
    if !error.use_stderr() {
        let _ = error.print();
        return ExitCode::SUCCESS;
    }
    let text = error.render().to_string();
    eprint!(
        "ringmq-bench: {}",
        text.strip_prefix("error: ").unwrap_or(&text)
    );
    ExitCode::from(2)
}

/// Runs one kind; `Ok(false)` when the run ended with an error but still produced a report.
fn run(args: &Args) -> Result<bool, BenchError> {
    let outcome = match args.kind {
        Kind::EchoServer => return kinds::run_echo(args).map(|()| true),
        Kind::Summary => {
            print!("{}", report::summary_table(&args.inputs, args.tsv)?);
            return Ok(true);
        }
        Kind::Producer => kinds::run_producer(args)?,
        Kind::Consumer => kinds::run_consumer(args)?,
        Kind::E2e => kinds::run_e2e(args)?,
        Kind::Catchup => kinds::run_catchup(args)?,
    };
    finish(args, &outcome)?;
    Ok(outcome.error.is_none())
}

/// Prints the summary and writes the JSON report and the SVG chart.
fn finish(args: &Args, outcome: &kinds::Outcome) -> Result<(), BenchError> {
    for result in &outcome.results {
        println!("{}", result.summary());
    }
    if let Some(gaps) = outcome.extra["offset_gaps"]
        .as_array()
        .filter(|g| !g.is_empty())
    {
        let gaps: Vec<&str> = gaps.iter().filter_map(|g| g.as_str()).collect();
        eprintln!(
            "ringmq-bench: warning: the broker's nextBeginOffset skipped records it never sent \
             ({} queue(s)): {}",
            gaps.len(),
            gaps.join("; ")
        );
    }
    if let Some(error) = &outcome.error {
        eprintln!("ringmq-bench: run stopped early: {error}");
    }
    if let Some(path) = &args.report {
        let report = report::report_json(
            args.to_json(),
            &outcome.results,
            &outcome.timeline,
            outcome.extra.clone(),
            outcome.error.as_deref(),
        );
        let text = serde_json::to_string_pretty(&report).map_err(|e| BenchError::BadReport {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        report::write_file(path, &text)?;
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "ringmq-bench {} {}",
            args.kind.name(),
            args.label.as_deref().unwrap_or("")
        );
        report::write_file(
            path,
            &report::render_svg(title.trim(), &outcome.results, &outcome.timeline),
        )?;
    }
    Ok(())
}
