//! The broker binary runs with the jemalloc options it sets (`_rjem_malloc_conf` in
//! `src/main.rs`). jemalloc says nothing when it clips an option to its limit, and on stderr
//! only when it refuses one, so the test reads the options jemalloc reports it runs with
//! (`stats_print`, at exit).

use std::process::Command;

#[test]
fn the_broker_binary_runs_with_its_jemalloc_options() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--version")
        // Options from the environment are read after the binary's; this one only prints.
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .expect("run ringmq --version");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ringmq --version failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("Global variable malloc_conf: \"background_thread:true\""),
        "jemalloc did not read the binary's options:\n{stderr}"
    );
    assert!(
        stderr.contains("opt.background_thread: true"),
        "jemalloc runs without its background thread:\n{stderr}"
    );
    assert!(
        !stderr.contains("<jemalloc>"),
        "jemalloc refused an option:\n{stderr}"
    );
}
