//! The one configuration struct of ringmq.
//!
//! Every field is settable by an environment variable `RINGMQ_<SECTION>_<FIELD>` whose name ends
//! with the unit, and, where RocketMQ has the setting, by its Java key in a broker.conf. Defaults
//! equal Apache RocketMQ's where it has one. The table [`fields`] is the single source of truth:
//! it parses the env vars and the broker.conf keys, prints the effective config, and is checked
//! against docs/CONFIG.md by a unit test so the docs cannot drift from the code.
//!
//! - `sections`: [`Config`], its sections, their value enums and defaults.
//! - `fields`: the table of settings ([`fields()`], [`FieldSpec`]).
//! - `env`: [`Config::from_env`] / [`Config::from_vars`].
//! - `validate`: [`Config::validate`], ranges and relations between fields.
//! - `describe`: [`Config::describe`] and [`markdown_table`].
//! - `delay_level`: [`Config::delay_levels_ms`].
//! - `properties`: the `java.util.Properties` text format.
//! - `broker_conf`: broker.conf, Java's keys mapped to the fields through the same table.
//! - `profile`: named profiles (`RINGMQ_PROFILE`), field values that move the defaults.
//! - `source`: [`Config::load`], the layers (defaults < profile < broker.conf < env < flags) and the
//!   source of each effective value ([`LoadedConfig`]).

mod broker_conf;
mod delay_level;
mod describe;
mod env;
mod error;
mod fields;
mod profile;
mod properties;
mod provenance;
mod sections;
mod source;
mod validate;
mod value;

pub use broker_conf::{from_java_unit, java_key, to_java_value, NOT_SUPPORTED};
pub use describe::markdown_table;
pub use error::{ConfigError, ConfigErrors};
pub use fields::{fields, FieldSpec};
pub use profile::{Profile, PROFILE_VAR};
pub use properties::{parse as parse_properties, PropertiesError, Property};
pub use provenance::{ConfWarning, ConfigInputs, LoadedConfig, Process, Source, WarningKind};
pub use sections::{
    AclSection, BrokerRole, BrokerSection, Config, FlushPolicy, HaSection, LogSection,
    LongpollSection, MetricsSection, NamesrvSection, ServerSection, StoreIoMode, StoreSection,
    TransferMode, TransferSection, ACL_FILE_NAME, WAKE_INLINE_PARKED_MAX_LIMIT, WAKE_THREADS_MAX,
};
pub use source::LoadError;
pub use validate::HA_TRANSFER_BATCH_MAX_BYTES;
