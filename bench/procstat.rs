//! CPU time of another process (the broker under test) from `/proc/<pid>/stat`.
//!
//! The catchup kind samples the broker's user and system time at the start and at the end of
//! the consume phase (`--broker-pid`), so it can report broker CPU seconds per GiB served. The
//! process totals of stat(5) cover every thread of the process, io_uring io-wq workers included
//! (they are threads of the process that owns the ring).

use std::io;

use serde_json::{json, Value};

use crate::error::BenchError;

/// stat(5) field numbers (1-based) of the values read here.
const FIELD_UTIME: usize = 14;
const FIELD_STIME: usize = 15;
const FIELD_STARTTIME: usize = 22;
/// Fields 1 (pid) and 2 (comm) come before the ones split on spaces.
const FIELDS_BEFORE_STATE: usize = 2;

/// Bytes in a GiB (CPU seconds are reported per GiB served).
pub const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// One `/proc/<pid>/stat` line, the fields this bench uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    /// The command name, without the parentheses (may contain spaces and parentheses).
    pub comm: String,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time after boot in ticks: tells a reused pid from the process first sampled.
    pub starttime_ticks: u64,
}

/// Why a stat line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatParseError {
    #[error("no `pid (comm)` prefix")]
    NoComm,
    #[error("pid `{0}` is not a number")]
    BadPid(String),
    #[error("field {field} is missing")]
    MissingField { field: usize },
    #[error("field {field} `{value}` is not a non-negative integer")]
    BadField { field: usize, value: String },
}

/// Parses the contents of `/proc/<pid>/stat`. The comm field is whatever the process named
/// itself, so it may hold spaces and `)`: it ends at the *last* `)` of the line (no later field
/// can contain one).
pub fn parse_stat(text: &str) -> Result<ProcStat, StatParseError> {
    let open = text.find(" (").ok_or(StatParseError::NoComm)?;
    let close = text.rfind(')').ok_or(StatParseError::NoComm)?;
    if close < open + 2 {
        return Err(StatParseError::NoComm);
    }
    let pid_text = text[..open].trim();
    let pid = pid_text
        .parse()
        .map_err(|_| StatParseError::BadPid(pid_text.to_owned()))?;
    let comm = text[open + 2..close].to_owned();
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |number: usize| -> Result<u64, StatParseError> {
        let value = rest
            .get(number - FIELDS_BEFORE_STATE - 1)
            .ok_or(StatParseError::MissingField { field: number })?;
        value.parse().map_err(|_| StatParseError::BadField {
            field: number,
            value: (*value).to_owned(),
        })
    };
    Ok(ProcStat {
        pid,
        comm,
        utime_ticks: field(FIELD_UTIME)?,
        stime_ticks: field(FIELD_STIME)?,
        starttime_ticks: field(FIELD_STARTTIME)?,
    })
}

/// Clock ticks per second of the stat times (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks_per_s() -> Result<u64, BenchError> {
    // SAFETY: sysconf only reads a system constant; it touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks)
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| BenchError::Io {
            what: "sysconf(_SC_CLK_TCK)".into(),
            source: io::Error::last_os_error(),
        })
}

/// Reads `/proc/<pid>/stat`.
pub fn read_stat(pid: u32) -> Result<ProcStat, BenchError> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|source| BenchError::BrokerPidRead {
        pid,
        path: path.clone(),
        source,
    })?;
    parse_stat(&text).map_err(|e| BenchError::BrokerPid {
        pid,
        reason: format!("{path}: {e}"),
    })
}

/// A sample of the broker's CPU time taken at the start of the consume phase.
#[derive(Debug, Clone)]
pub struct BrokerCpu {
    start: ProcStat,
    ticks_per_s: u64,
}

/// The broker's CPU over the consume phase and what it served meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerCpuUse {
    pub pid: u32,
    pub comm: String,
    pub user_s: f64,
    pub sys_s: f64,
    /// Pull response bodies received: whole CommitLog records as the broker sent them.
    pub served_record_bytes: u64,
    /// The message bodies inside those records.
    pub served_body_bytes: u64,
}

impl BrokerCpu {
    /// Samples the broker's CPU time now.
    pub fn start(pid: u32) -> Result<Self, BenchError> {
        Ok(BrokerCpu {
            start: read_stat(pid)?,
            ticks_per_s: clock_ticks_per_s()?,
        })
    }

    /// Samples again and returns the CPU used since [`BrokerCpu::start`].
    pub fn finish(
        &self,
        served_record_bytes: u64,
        served_body_bytes: u64,
    ) -> Result<BrokerCpuUse, BenchError> {
        let end = read_stat(self.start.pid)?;
        if end.starttime_ticks != self.start.starttime_ticks {
            return Err(BenchError::BrokerPid {
                pid: self.start.pid,
                reason: "the process exited during the run (the pid now names another one)".into(),
            });
        }
        let seconds = |from: u64, to: u64| to.saturating_sub(from) as f64 / self.ticks_per_s as f64;
        Ok(BrokerCpuUse {
            pid: end.pid,
            comm: end.comm,
            user_s: seconds(self.start.utime_ticks, end.utime_ticks),
            sys_s: seconds(self.start.stime_ticks, end.stime_ticks),
            served_record_bytes,
            served_body_bytes,
        })
    }
}

impl BrokerCpuUse {
    fn per_gib(&self, seconds: f64) -> f64 {
        if self.served_record_bytes == 0 {
            0.0
        } else {
            seconds / (self.served_record_bytes as f64 / BYTES_PER_GIB)
        }
    }

    pub fn user_s_per_gib(&self) -> f64 {
        self.per_gib(self.user_s)
    }

    pub fn sys_s_per_gib(&self) -> f64 {
        self.per_gib(self.sys_s)
    }

    /// The fields merged into the report's `extra`.
    pub fn to_json(&self) -> Value {
        let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
        json!({
            "broker_pid": self.pid,
            "broker_comm": self.comm,
            "broker_cpu_user_s": round(self.user_s),
            "broker_cpu_sys_s": round(self.sys_s),
            "served_record_bytes": self.served_record_bytes,
            "served_body_bytes": self.served_body_bytes,
            "broker_cpu_user_s_per_gib": round(self.user_s_per_gib()),
            "broker_cpu_sys_s_per_gib": round(self.sys_s_per_gib()),
            "broker_cpu_total_s_per_gib": round(self.user_s_per_gib() + self.sys_s_per_gib()),
            "broker_cpu_meaning": "broker process user/system CPU (all threads) from the first \
                pull to the last response of the consume phase (the fill is not counted), per GiB \
                of pull response bodies received (whole CommitLog records, served_record_bytes)",
        })
    }

    /// The human summary line.
    pub fn summary(&self) -> String {
        format!(
            "broker cpu (pid {}): user {:.2} s, sys {:.2} s over {:.1} MiB of records \
             ({:.1} MiB of bodies) = user {:.3} s/GiB, sys {:.3} s/GiB, total {:.3} s/GiB",
            self.pid,
            self.user_s,
            self.sys_s,
            self.served_record_bytes as f64 / (1024.0 * 1024.0),
            self.served_body_bytes as f64 / (1024.0 * 1024.0),
            self.user_s_per_gib(),
            self.sys_s_per_gib(),
            self.user_s_per_gib() + self.sys_s_per_gib()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line of a kernel 6.x stat file, with the comm replaced.
    fn line(comm: &str) -> String {
        format!(
            "4242 ({comm}) S 1 4242 4242 0 -1 4194560 1520 0 0 0 731 288 0 0 20 0 5 0 \
             987654 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 17638 0 0 0 17 1 \
             0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    #[test]
    fn parses_times_and_comm() {
        let stat = parse_stat(&line("ringmq")).expect("parses");
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.comm, "ringmq");
        assert_eq!(stat.utime_ticks, 731);
        assert_eq!(stat.stime_ticks, 288);
        assert_eq!(stat.starttime_ticks, 987654);
    }

    #[test]
    fn comm_may_hold_spaces_and_parentheses() {
        for comm in [
            "a b",
            "x) S 1 2 (y",
            ")",
            "((",
            "r) 9 9 9 9 9 9 9 9 9 9 9 9 9 9",
        ] {
            let stat = parse_stat(&line(comm)).expect(comm);
            assert_eq!(stat.comm, comm);
            assert_eq!((stat.utime_ticks, stat.stime_ticks), (731, 288), "{comm}");
        }
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert_eq!(parse_stat(""), Err(StatParseError::NoComm));
        assert_eq!(parse_stat("12 ringmq S 1"), Err(StatParseError::NoComm));
        assert!(matches!(
            parse_stat("x (ringmq) S 1"),
            Err(StatParseError::BadPid(_))
        ));
        assert_eq!(
            parse_stat("12 (ringmq) S 1 2 3"),
            Err(StatParseError::MissingField { field: FIELD_UTIME })
        );
        let bad = line("ringmq").replace(" 731 ", " -5 ");
        assert!(matches!(
            parse_stat(&bad),
            Err(StatParseError::BadField {
                field: FIELD_UTIME,
                ..
            })
        ));
    }

    #[test]
    fn reads_this_process_and_rejects_a_missing_pid() {
        let me = read_stat(std::process::id()).expect("own stat");
        assert_eq!(me.pid, std::process::id());
        assert!(clock_ticks_per_s().expect("tick rate") > 0);
        // pid_max is at most 2^22, so this pid never exists.
        let error = read_stat(u32::MAX).expect_err("no such process");
        assert!(
            error.to_string().contains("/proc/4294967295/stat"),
            "{error}"
        );
    }

    #[test]
    fn per_gib_uses_record_bytes() {
        let cpu = BrokerCpuUse {
            pid: 1,
            comm: "ringmq".into(),
            user_s: 1.0,
            sys_s: 0.5,
            served_record_bytes: 2 * 1024 * 1024 * 1024,
            served_body_bytes: 1024,
        };
        assert_eq!(cpu.user_s_per_gib(), 0.5);
        assert_eq!(cpu.sys_s_per_gib(), 0.25);
        assert_eq!(cpu.to_json()["broker_cpu_total_s_per_gib"], 0.75);
        let idle = BrokerCpuUse {
            served_record_bytes: 0,
            ..cpu
        };
        assert_eq!(idle.user_s_per_gib(), 0.0);
    }
}
