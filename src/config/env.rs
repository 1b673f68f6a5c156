//! Reading `RINGMQ_<SECTION>_<FIELD>` environment variables over the defaults.

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::fields::fields;
use super::profile::PROFILE_VAR;
use super::provenance::{LoadedConfig, Source};

/// `RINGMQ_` variables that are not config fields but read elsewhere (bench, tests).
const RESERVED_VARS: &[&str] = &["RINGMQ_BIN"];
const RESERVED_PREFIXES: &[&str] = &["RINGMQ_IT_", "RINGMQ_BENCH_", "RINGMQ_TEST_"];

/// The environment layer: every `RINGMQ_*` variable of `vars` over what `loaded` holds.
pub(super) fn apply_vars(
    loaded: &mut LoadedConfig,
    vars: impl IntoIterator<Item = (String, String)>,
    errors: &mut Vec<ConfigError>,
) {
    let by_env: BTreeMap<&str, usize> = fields()
        .iter()
        .enumerate()
        .map(|(index, f)| (f.env, index))
        .collect();
    for (name, value) in vars {
        if !name.starts_with("RINGMQ_") {
            continue;
        }
        let reason = match by_env.get(name.as_str()) {
            Some(&index) => match loaded.set(index, &value, Source::Env) {
                Ok(()) => continue,
                Err(reason) => reason,
            },
            None if is_reserved(&name) || name == PROFILE_VAR => continue,
            None => "unknown ringmq setting (see docs/CONFIG.md)".into(),
        };
        errors.push(ConfigError {
            var: name,
            value,
            reason,
            at: None,
        });
    }
}

fn is_reserved(name: &str) -> bool {
    RESERVED_VARS.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::Config;
    use crate::config::FlushPolicy;

    #[test]
    fn env_vars_override_defaults() {
        let c = Config::from_pairs(&[
            ("RINGMQ_BROKER_LISTEN_PORT", "20911"),
            ("RINGMQ_STORE_FLUSH_POLICY", "SYNC_FLUSH"),
            ("RINGMQ_STORE_ROOT_DIR", "/tmp/x"),
            ("RINGMQ_LONGPOLL_ENABLED", "false"),
            ("PATH", "/bin"),
        ])
        .unwrap();
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(c.store.flush_policy, FlushPolicy::Sync);
        assert_eq!(c.store.root_dir, PathBuf::from("/tmp/x"));
        assert!(!c.longpoll.enabled);
    }

    #[test]
    fn errors_name_variable_value_and_reason() {
        let err = Config::from_pairs(&[
            ("RINGMQ_BROKER_LISTEN_PORT", "70000"),
            ("RINGMQ_STORE_FLUSH_POLICY", "sometimes"),
            ("RINGMQ_STORE_COMIT_LOG_FILE_SIZE_BYTES", "1"),
        ])
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(err.0.len(), 3, "{text}");
        assert!(
            text.contains("RINGMQ_BROKER_LISTEN_PORT=\"70000\" is invalid"),
            "{text}"
        );
        assert!(
            text.contains("RINGMQ_STORE_FLUSH_POLICY=\"sometimes\""),
            "{text}"
        );
        assert!(text.contains("unknown ringmq setting"), "{text}");
    }
}
