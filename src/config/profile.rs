//! Named profiles: a set of field values chosen together for one goal, applied over the
//! defaults and under every other layer (`RINGMQ_PROFILE=low-latency`).
//!
//! A profile is not a field: it only moves defaults, so a broker.conf entry, a `RINGMQ_*`
//! variable or a flag for the same field still wins, and `ringmq config` names the profile as
//! the source of each value it set. Each profile's settings are the ones measured to serve its
//! goal (docs/CONFIG.md, "Profiles"; the figures are in docs/BENCHMARKS.md).

use super::error::ConfigError;
use super::fields::fields;
use super::provenance::{LoadedConfig, Source};

/// The variable that names the profile.
pub const PROFILE_VAR: &str = "RINGMQ_PROFILE";

/// A named set of settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// RocketMQ's defaults: nothing changes.
    Default,
    /// The shortest end-to-end tail: a message that arrives on a queue with up to four parked
    /// pulls is answered by the thread that appended it, not handed to the consumers' threads. Under
    /// many queues at full rate (W5) the producers slow down to the pace the consumers keep, so
    /// the e2e tail stays near the send tail, at the cost of send throughput.
    LowLatency,
}

impl Profile {
    /// Every profile, by name.
    pub const ALL: [Profile; 2] = [Profile::Default, Profile::LowLatency];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::LowLatency => "low-latency",
        }
    }

    /// The fields it sets, as `(env var, value)`.
    pub fn settings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Profile::Default => &[],
            Profile::LowLatency => &[("RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX", "4")],
        }
    }

    fn parse(text: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == text.trim())
    }
}

/// Applies the profile named by [`PROFILE_VAR`] in `vars`, if any, over the defaults in
/// `loaded` (called before every other layer).
pub(super) fn apply(
    loaded: &mut LoadedConfig,
    vars: &[(String, String)],
    errors: &mut Vec<ConfigError>,
) {
    let Some((_, value)) = vars.iter().rev().find(|(name, _)| name == PROFILE_VAR) else {
        return;
    };
    let Some(profile) = Profile::parse(value) else {
        let known: Vec<&str> = Profile::ALL.iter().map(|p| p.name()).collect();
        errors.push(ConfigError {
            var: PROFILE_VAR.into(),
            value: value.clone(),
            reason: format!("unknown profile; known profiles: {}", known.join(", ")),
            at: None,
        });
        return;
    };
    for (env, text) in profile.settings() {
        let index = fields()
            .iter()
            .position(|f| f.env == *env)
            .expect("a profile sets fields of the table");
        loaded
            .set(index, text, Source::Profile(profile.name()))
            .expect("a profile's values parse");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ConfigInputs};

    fn load(vars: &[(&str, &str)]) -> Result<LoadedConfig, crate::config::ConfigErrors> {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        super::super::source::layer(&ConfigInputs::default(), None, vars)
    }

    #[test]
    fn every_profile_sets_values_its_fields_accept() {
        for profile in Profile::ALL {
            let mut loaded = LoadedConfig::defaults();
            let mut errors = Vec::new();
            let vars = vec![(PROFILE_VAR.to_string(), profile.name().to_string())];
            apply(&mut loaded, &vars, &mut errors);
            assert!(errors.is_empty(), "{errors:?}");
            assert!(loaded.config.validate().is_empty(), "{}", profile.name());
        }
    }

    #[test]
    fn low_latency_answers_arrivals_on_the_appending_thread_and_says_so() {
        let loaded = load(&[(PROFILE_VAR, "low-latency")]).unwrap();
        assert_eq!(loaded.config.longpoll.wake_inline_parked_max, 4);
        assert_eq!(
            loaded.source_of("RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX"),
            Some(&Source::Profile("low-latency"))
        );
        let default = load(&[(PROFILE_VAR, "default")]).unwrap();
        assert_eq!(default.config.longpoll.wake_inline_parked_max, 0);
        assert_eq!(
            Config::default().longpoll.wake_inline_parked_max,
            0,
            "without a profile the appending thread answers no pull itself"
        );
    }

    #[test]
    fn a_variable_for_the_same_field_beats_the_profile() {
        let loaded = load(&[
            ("RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX", "1"),
            (PROFILE_VAR, "low-latency"),
        ])
        .unwrap();
        assert_eq!(loaded.config.longpoll.wake_inline_parked_max, 1);
        assert_eq!(
            loaded.source_of("RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX"),
            Some(&Source::Env)
        );
    }

    #[test]
    fn an_unknown_profile_is_refused_with_the_known_ones() {
        let errors = load(&[(PROFILE_VAR, "fastest")]).unwrap_err();
        let text = errors.to_string();
        assert!(text.contains(PROFILE_VAR), "{text}");
        assert!(text.contains("fastest"), "{text}");
        assert!(text.contains("default, low-latency"), "{text}");
    }
}
