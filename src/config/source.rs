//! The layers of the configuration and where each effective value came from.
//!
//! Precedence, lowest first: the defaults, the broker.conf given by `-c` (Java's key names, see
//! `broker_conf`), the `RINGMQ_*` environment variables, then the flags (`-n`). The environment
//! beats the file so one file can serve several brokers that differ only in, say, ports or data
//! dirs; a flag beats both as Java's `BrokerStartup` lets `-n` override the file's namesrvAddr.

use std::fmt;
use std::path::{Path, PathBuf};

use super::broker_conf;
use super::env;
use super::error::{ConfigError, ConfigErrors};
use super::fields::fields;
use super::properties::{self, Property};
use super::sections::{BrokerRole, Config};

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
    /// A command-line flag such as `-n`.
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { path, line, .. } => write!(f, "{}:{line}", path.display()),
            Source::Env => f.write_str("env"),
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

/// A configuration that could not be loaded: the file is unreadable, or values are invalid.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{}: malformed \\uXXXX escape in `{}`", path.display(), source.line, source.text)]
    Syntax {
        path: PathBuf,
        #[source]
        source: properties::PropertiesError,
    },
    #[error(transparent)]
    Invalid(#[from] ConfigErrors),
}

/// The effective configuration, the source of each field (in [`fields`] order) and the warnings.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    sources: Vec<Source>,
    pub warnings: Vec<ConfWarning>,
}

impl LoadedConfig {
    fn defaults() -> LoadedConfig {
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

    /// Why this configuration must not run as a broker, if it must not: a SLAVE would accept
    /// sends (ringmq has no replication yet and its store does not refuse puts as Java's
    /// `DefaultMessageStore` does for a slave), so it is refused rather than run wrongly.
    pub fn broker_refusal(&self) -> Option<String> {
        if self.config.broker.role != BrokerRole::Slave {
            return None;
        }
        let source = self
            .source_of("RINGMQ_BROKER_ROLE")
            .map_or_else(String::new, |s| format!(" (set by {})", describe_source(s)));
        Some(format!(
            "brokerRole SLAVE{source} is not supported yet: ringmq has no master/slave \
             replication, so a slave would hold no data and would accept sends, which a slave \
             must refuse"
        ))
    }
}

/// A source as the operator would look it up: the file, line and key, the variable, the flag.
pub(super) fn describe_source(source: &Source) -> String {
    match source {
        Source::File { key, .. } => format!("{source} {key}"),
        other => other.to_string(),
    }
}

impl Config {
    /// The configuration of `inputs` over the defaults, with the environment `vars`: reads the
    /// file, applies every layer, validates, and reports every problem at once.
    pub fn load(
        inputs: &ConfigInputs,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LoadedConfig, LoadError> {
        let file = match &inputs.file {
            Some(path) => {
                let entries =
                    properties::parse(&read_text(path)?).map_err(|source| LoadError::Syntax {
                        path: path.clone(),
                        source,
                    })?;
                Some((path.as_path(), entries))
            }
            None => None,
        };
        Ok(layer(inputs, file, vars)?)
    }
}

/// Java's `Properties.load(InputStream)` reads ISO-8859-1; a file that is valid UTF-8 (every
/// ASCII file is) is read as UTF-8, any other byte by byte as Latin-1, as Java would.
fn read_text(path: &Path) -> Result<String, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect()))
}

/// Applies the layers in order of precedence and validates the result.
pub(super) fn layer(
    inputs: &ConfigInputs,
    file: Option<(&Path, Vec<Property>)>,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<LoadedConfig, ConfigErrors> {
    let mut loaded = LoadedConfig::defaults();
    let mut errors = Vec::new();
    if let Some((path, entries)) = file {
        broker_conf::apply(&mut loaded, path, &entries, inputs.process, &mut errors);
    }
    env::apply_vars(&mut loaded, vars, &mut errors);
    if let Some(addr) = &inputs.namesrv_addr {
        apply_flag(&mut loaded, "-n", "RINGMQ_NAMESRV_ADDR", addr, &mut errors);
    }
    if inputs.process == Process::Broker {
        broker_conf::warn_about_role(&mut loaded);
    }
    errors.extend(loaded.config.validate().into_iter().map(|mut e| {
        // A relation broken by a file's value names the file's line and key too.
        if let Some(source @ (Source::File { .. } | Source::Flag(_))) = loaded.source_of(&e.var) {
            e.at = Some(describe_source(source));
        }
        e
    }));
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(ConfigErrors(errors))
    }
}

fn apply_flag(
    loaded: &mut LoadedConfig,
    flag: &'static str,
    env: &str,
    value: &str,
    errors: &mut Vec<ConfigError>,
) {
    let index = fields()
        .iter()
        .position(|f| f.env == env)
        .expect("a flag sets a field of the table");
    if let Err(reason) = loaded.set(index, value, Source::Flag(flag)) {
        errors.push(ConfigError {
            var: env.into(),
            value: value.into(),
            reason,
            at: Some(format!("flag {flag}")),
        });
    }
}
