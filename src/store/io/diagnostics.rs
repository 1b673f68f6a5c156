//! One-line explanations of io_uring setup failures.
//!
//! A host can refuse io_uring in several ways that all look like a bare errno: a seccomp profile
//! (`EPERM` or `ENOSYS`), the `kernel.io_uring_disabled` sysctl (`EPERM`, Linux >= 6.6), an old
//! kernel (`ENOSYS`), or `RLIMIT_MEMLOCK` too small for the registered buffers (`ENOMEM`). The
//! operator gets one line naming the likely cause, the setting to change and the env var that
//! allows the pread fallback. The text is built by a pure function over [`HostFacts`] so it can be
//! tested without breaking the host.

use std::fmt;
use std::io;

use super::config::IoConfig;

/// Env var that lets the store read with pread(2) when io_uring cannot be set up. The config
/// module maps it onto [`IoConfig::allow_pread_fallback`].
pub const PREAD_FALLBACK_ENV_VAR: &str = "RINGMQ_STORE_IO_PREAD_FALLBACK_ALLOWED";

/// 0 = io_uring allowed, 1 = only for `kernel.io_uring_group` (or CAP_SYS_ADMIN), 2 = disabled.
pub const IO_URING_DISABLED_SYSCTL_PATH: &str = "/proc/sys/kernel/io_uring_disabled";

const KERNEL_RELEASE_PATH: &str = "/proc/sys/kernel/osrelease";

/// Where setting up a thread's ring failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupStage {
    /// `io_uring_setup(2)`.
    CreateRing,
    /// Allocating or registering the fixed buffers (`io_uring_register(2)`).
    RegisterBuffers,
    /// The engine already has `thread_rings_max` rings.
    ThreadRingLimit,
}

impl fmt::Display for SetupStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SetupStage::CreateRing => "ring setup (io_uring_setup)",
            SetupStage::RegisterBuffers => "buffer registration (io_uring_register)",
            SetupStage::ThreadRingLimit => "per-thread ring creation",
        })
    }
}

/// One resource limit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RlimitValue {
    Bytes(u64),
    Unlimited,
}

impl fmt::Display for RlimitValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlimitValue::Bytes(bytes) => write!(f, "{bytes} bytes"),
            RlimitValue::Unlimited => f.write_str("unlimited"),
        }
    }
}

/// The host settings the diagnosis looks at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostFacts {
    /// Value of `kernel.io_uring_disabled`; `None` when the sysctl does not exist (< 6.6).
    pub io_uring_disabled: Option<u32>,
    /// `RLIMIT_MEMLOCK` (soft, hard); `None` if getrlimit failed.
    pub memlock: Option<(RlimitValue, RlimitValue)>,
    /// `uname -r`.
    pub kernel_release: Option<String>,
}

impl HostFacts {
    /// Reads the facts of this host and process.
    pub fn read() -> HostFacts {
        HostFacts {
            io_uring_disabled: std::fs::read_to_string(IO_URING_DISABLED_SYSCTL_PATH)
                .ok()
                .and_then(|text| text.trim().parse().ok()),
            memlock: read_memlock(),
            kernel_release: std::fs::read_to_string(KERNEL_RELEASE_PATH)
                .ok()
                .map(|text| text.trim().to_owned()),
        }
    }
}

fn read_memlock() -> Option<(RlimitValue, RlimitValue)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 {
        return None;
    }
    let value = |raw: libc::rlim_t| {
        if raw == libc::RLIM_INFINITY {
            RlimitValue::Unlimited
        } else {
            RlimitValue::Bytes(raw)
        }
    };
    Some((value(limit.rlim_cur), value(limit.rlim_max)))
}

fn errno_name(error: &io::Error) -> String {
    let name = match error.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EACCES) => "EACCES",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        Some(libc::EFAULT) => "EFAULT",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(other) => return format!("errno {other}"),
        None => return format!("{:?}", error.kind()),
    };
    name.to_owned()
}

/// The one-line diagnosis for a failed ring setup.
pub fn describe_setup_failure(
    stage: SetupStage,
    error: &io::Error,
    facts: &HostFacts,
    config: &IoConfig,
) -> String {
    let errno = error.raw_os_error();
    let cause = match (stage, errno) {
        (SetupStage::CreateRing, Some(libc::EPERM | libc::EACCES | libc::ENOSYS)) => {
            io_uring_refused(errno, facts)
        }
        (SetupStage::CreateRing, Some(libc::ENOMEM)) => format!(
            "not enough locked memory for the ring: kernels before 5.12 count ring memory \
             against RLIMIT_MEMLOCK ({}); {}",
            memlock_text(facts),
            MEMLOCK_FIX
        ),
        (SetupStage::CreateRing, Some(libc::EMFILE | libc::ENFILE)) => {
            "out of file descriptors (each reading thread holds one ring fd): raise the open \
             files limit (ulimit -n, systemd LimitNOFILE=)"
                .to_owned()
        }
        (SetupStage::CreateRing, Some(libc::EINVAL)) => format!(
            "the kernel rejected ring_entries {} (Linux >= 5.1 is needed; kernel {})",
            config.ring_entries,
            facts.kernel_release.as_deref().unwrap_or("unknown")
        ),
        (SetupStage::RegisterBuffers, Some(libc::ENOMEM)) => format!(
            "RLIMIT_MEMLOCK is too small for the registered buffers: {} bytes per ring \
             (fixed_buffer_count {} x fixed_buffer_size_bytes {}, one ring per reading thread, \
             counted across all rings of the user), limit {}; {} or lower \
             fixed_buffer_count/fixed_buffer_size_bytes",
            config.registered_bytes_per_ring(),
            config.fixed_buffer_count,
            config.fixed_buffer_size_bytes,
            memlock_text(facts),
            MEMLOCK_FIX
        ),
        (SetupStage::RegisterBuffers, None) => format!(
            "could not allocate {} bytes for the fixed buffers",
            config.registered_bytes_per_ring()
        ),
        (SetupStage::ThreadRingLimit, _) => format!(
            "this engine already has thread_rings_max = {} rings (one per reading thread): \
             read from fewer threads or raise thread_rings_max",
            config.thread_rings_max
        ),
        _ => "unexpected error".to_owned(),
    };
    format!(
        "store io: io_uring {stage} failed ({}: {error}): {cause}; to read with pread(2) \
         instead set {PREAD_FALLBACK_ENV_VAR}=true",
        errno_name(error)
    )
}

const MEMLOCK_FIX: &str = "raise it (ulimit -l, systemd LimitMEMLOCK=, docker run --ulimit \
                           memlock=-1, or memlock in /etc/security/limits.conf), grant \
                           CAP_IPC_LOCK,";

fn memlock_text(facts: &HostFacts) -> String {
    match facts.memlock {
        Some((soft, hard)) => format!("RLIMIT_MEMLOCK soft {soft}, hard {hard}"),
        None => "RLIMIT_MEMLOCK unknown".to_owned(),
    }
}

fn io_uring_refused(errno: Option<i32>, facts: &HostFacts) -> String {
    match facts.io_uring_disabled {
        Some(2) => format!(
            "io_uring is disabled on this host ({IO_URING_DISABLED_SYSCTL_PATH} = 2): set \
             sysctl kernel.io_uring_disabled=0"
        ),
        Some(1) => format!(
            "io_uring is limited to the group in kernel.io_uring_group \
             ({IO_URING_DISABLED_SYSCTL_PATH} = 1): add the broker's user to that group or set \
             sysctl kernel.io_uring_disabled=0"
        ),
        disabled => {
            let sysctl = match disabled {
                Some(value) => format!("{IO_URING_DISABLED_SYSCTL_PATH} = {value}"),
                None => format!("{IO_URING_DISABLED_SYSCTL_PATH} absent"),
            };
            let kernel = facts.kernel_release.as_deref().unwrap_or("unknown");
            if errno == Some(libc::ENOSYS) {
                format!(
                    "the io_uring syscalls are missing: kernel {kernel} is older than 5.1 or \
                     built without CONFIG_IO_URING, or a seccomp profile answers ENOSYS \
                     ({sysctl}); use a kernel with io_uring or a seccomp profile that allows \
                     io_uring_setup, io_uring_enter and io_uring_register"
                )
            } else {
                format!(
                    "io_uring is blocked by a seccomp profile ({sysctl}, e.g. the default \
                     Docker/containerd profile): run with a profile that allows io_uring_setup, \
                     io_uring_enter and io_uring_register"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            io_uring_disabled: Some(0),
            memlock: Some((RlimitValue::Bytes(8 << 20), RlimitValue::Bytes(8 << 20))),
            kernel_release: Some("6.1.0".to_owned()),
        }
    }

    #[test]
    fn register_enomem_names_memlock_with_the_current_limit() {
        let text = describe_setup_failure(
            SetupStage::RegisterBuffers,
            &io::Error::from_raw_os_error(libc::ENOMEM),
            &facts(),
            &IoConfig::default(),
        );
        assert!(text.contains("RLIMIT_MEMLOCK"), "{text}");
        assert!(text.contains("ENOMEM"), "{text}");
        assert!(text.contains("soft 8388608 bytes"), "{text}");
        assert!(text.contains("LimitMEMLOCK"), "{text}");
        assert!(text.contains("1048576 bytes per ring"), "{text}");
        assert!(
            text.contains("RINGMQ_STORE_IO_PREAD_FALLBACK_ALLOWED=true"),
            "{text}"
        );
        assert!(!text.contains('\n'), "one line: {text}");
    }

    #[test]
    fn unlimited_memlock_is_spelled_out() {
        let mut facts = facts();
        facts.memlock = Some((RlimitValue::Unlimited, RlimitValue::Unlimited));
        let text = describe_setup_failure(
            SetupStage::RegisterBuffers,
            &io::Error::from_raw_os_error(libc::ENOMEM),
            &facts,
            &IoConfig::default(),
        );
        assert!(text.contains("soft unlimited, hard unlimited"), "{text}");
    }

    #[test]
    fn eperm_with_sysctl_2_names_io_uring_disabled() {
        let mut facts = facts();
        facts.io_uring_disabled = Some(2);
        let text = describe_setup_failure(
            SetupStage::CreateRing,
            &io::Error::from_raw_os_error(libc::EPERM),
            &facts,
            &IoConfig::default(),
        );
        assert!(text.contains("io_uring_disabled = 2"), "{text}");
        assert!(text.contains("kernel.io_uring_disabled=0"), "{text}");
        assert!(!text.contains("seccomp"), "{text}");
        assert!(text.contains(PREAD_FALLBACK_ENV_VAR), "{text}");
    }

    #[test]
    fn eperm_with_sysctl_0_blames_seccomp() {
        let text = describe_setup_failure(
            SetupStage::CreateRing,
            &io::Error::from_raw_os_error(libc::EPERM),
            &facts(),
            &IoConfig::default(),
        );
        assert!(text.contains("seccomp"), "{text}");
        assert!(text.contains("EPERM"), "{text}");
    }

    #[test]
    fn enosys_names_kernel_and_seccomp() {
        let mut facts = facts();
        facts.io_uring_disabled = None;
        facts.kernel_release = Some("4.19.0".to_owned());
        let text = describe_setup_failure(
            SetupStage::CreateRing,
            &io::Error::from_raw_os_error(libc::ENOSYS),
            &facts,
            &IoConfig::default(),
        );
        assert!(text.contains("4.19.0"), "{text}");
        assert!(text.contains("seccomp"), "{text}");
        assert!(text.contains("ENOSYS"), "{text}");
    }

    #[test]
    fn host_facts_read_does_not_fail_here() {
        let facts = HostFacts::read();
        assert!(facts.memlock.is_some());
        assert!(facts.kernel_release.is_some());
    }
}
