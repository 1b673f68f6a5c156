//! The layers of the configuration and where each effective value came from.
//!
//! Precedence, lowest first: the defaults, the profile named by `RINGMQ_PROFILE` (see
//! `profile`), the broker.conf given by `-c` (Java's key names, see `broker_conf`), the
//! `RINGMQ_*` environment variables, then the flags (`-n`). The environment
//! beats the file so one file can serve several brokers that differ only in, say, ports or data
//! dirs; a flag beats both as Java's `BrokerStartup` lets `-n` override the file's namesrvAddr.

use std::path::{Path, PathBuf};

use super::broker_conf;
use super::env;
use super::error::{ConfigError, ConfigErrors};
use super::fields::fields;
use super::profile;
use super::properties::{self, Property};
use super::provenance::{describe_source, ConfigInputs, LoadedConfig, Source};
use super::sections::Config;

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

impl Config {
    /// Reads the process environment on top of the defaults and validates the result.
    pub fn from_env() -> Result<Config, ConfigErrors> {
        Self::from_vars(std::env::vars())
    }

    /// Applies `RINGMQ_*` variables from `vars` over the defaults. Unknown `RINGMQ_` variables
    /// are errors (a typo must not silently run with a default).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigErrors> {
        layer(&ConfigInputs::default(), None, vars).map(|loaded| loaded.config)
    }

    /// [`Config::from_vars`] over literal pairs, for tests.
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        Self::from_vars(
            pairs
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string())),
        )
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
    let vars: Vec<(String, String)> = vars.into_iter().collect();
    profile::apply(&mut loaded, &vars, &mut errors);
    if let Some((path, entries)) = file {
        broker_conf::apply(&mut loaded, path, &entries, inputs.process, &mut errors);
    }
    env::apply_vars(&mut loaded, vars, &mut errors);
    if let Some(addr) = &inputs.namesrv_addr {
        apply_flag(&mut loaded, "-n", "RINGMQ_NAMESRV_ADDR", addr, &mut errors);
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
