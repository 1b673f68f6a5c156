//! Where each effective value came from: the sources, the loaded configuration that records
//! them, and the warnings a file can raise. The layers that fill it are in `source`.

use std::fmt;
use std::path::PathBuf;

use super::fields::fields;
use super::sections::Config;

/// Where one effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    /// A broker.conf entry: the file, the line it starts on and its Java key.
    File {
        path: PathBuf,
        line: usize,
        key: String,
    },
    Env,
    /// The profile named by `RINGMQ_PROFILE`.
    Profile(&'static str),
    /// A command-line flag such as `-n`.
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { path, line, .. } => write!(f, "{}:{line}", path.display()),
            Source::Env => f.write_str("env"),
            Source::Profile(name) => write!(f, "profile {name}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// Which process reads the file: a key both have (`listenPort`) sets that process's field, as
/// Java's `BrokerStartup` and `NamesrvStartup` each fill their own `NettyServerConfig`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Process {
    #[default]
    Broker,
    Namesrv,
}

/// What the command line says about the configuration.
#[derive(Debug, Clone, Default)]
pub struct ConfigInputs {
    /// A broker.conf (Java properties) to read over the defaults (`-c`).
    pub file: Option<PathBuf>,
    pub process: Process,
    /// Name server addresses from `-n`, over the file and the environment.
    pub namesrv_addr: Option<String>,
}

/// Why a broker.conf entry was not applied, though the process still starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// Not a RocketMQ key ringmq knows (Java ignores those too; real files carry many).
    UnknownKey,
    /// A RocketMQ setting that ringmq does not implement yet.
    NotSupported,
    /// A spelling of an older RocketMQ release, read as today's key.
    OldSpelling,
}

/// A setting that is accepted but not (or not fully) honoured, named for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfWarning {
    pub kind: WarningKind,
    /// `FILE:LINE`, or the source of the value.
    pub at: String,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.at, self.key, self.message)
    }
}

/// The effective configuration, the source of each field (in [`fields`] order) and the warnings.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    sources: Vec<Source>,
    pub warnings: Vec<ConfWarning>,
}

impl LoadedConfig {
    pub(super) fn defaults() -> LoadedConfig {
        LoadedConfig {
            config: Config::default(),
            sources: vec![Source::Default; fields().len()],
            warnings: Vec::new(),
        }
    }

    /// Where the field of env var `env` got its value.
    pub fn source_of(&self, env: &str) -> Option<&Source> {
        let index = fields().iter().position(|f| f.env == env)?;
        self.sources.get(index)
    }

    /// Each field's source, in [`fields`] order.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// Parses `text` into field `index` and records `source` as where it came from.
    pub(super) fn set(&mut self, index: usize, text: &str, source: Source) -> Result<(), String> {
        fields()[index].assign(&mut self.config, text)?;
        self.sources[index] = source;
        Ok(())
    }
}

/// A source as the operator would look it up: the file, line and key, the variable, the flag.
pub(super) fn describe_source(source: &Source) -> String {
    match source {
        Source::File { key, .. } => format!("{source} {key}"),
        other => other.to_string(),
    }
}
