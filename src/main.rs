//! `ringmq`: the broker binary. See README.md.

use std::process::ExitCode;

use ringmq::config::{self, Config};

fn usage() -> &'static str {
    "usage: ringmq [broker|namesrv|config [--markdown]]\n\
     Settings come from RINGMQ_* environment variables (docs/CONFIG.md)."
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str).unwrap_or("broker");
    if command == "config" && args.get(1).map(String::as_str) == Some("--markdown") {
        print!("{}", config::markdown_table());
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringmq: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    match command {
        "config" => {
            print!("{}", config.describe());
            ExitCode::SUCCESS
        }
        "-h" | "--help" | "help" => {
            println!("{}", usage());
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("ringmq: unknown command `{other}`\n{}", usage());
            ExitCode::from(2)
        }
    }
}
