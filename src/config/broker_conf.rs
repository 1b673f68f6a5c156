//! broker.conf: a Java properties file with RocketMQ's key names (`BrokerConfig`,
//! `MessageStoreConfig`, `NettyServerConfig`), as `mqbroker -c` reads it.
//!
//! A key is mapped to its field through the one table of settings ([`fields`], its RocketMQ
//! column): no second list of keys. The value is parsed by the same parser as the field's
//! environment variable, after a conversion where Java's unit differs from ringmq's (see
//! [`from_java_unit`]). Keys that are not in the table are warned about, never fatal, as Java's
//! `MixAll.properties2Object` ignores them: a RocketMQ setting ringmq does not implement yet
//! ([`NOT_SUPPORTED`]) is named as such, any other key as unknown.

use std::borrow::Cow;
use std::path::Path;

use super::error::ConfigError;
use super::fields::{fields, FieldSpec};
use super::properties::Property;
use super::provenance::{ConfWarning, LoadedConfig, Process, Source, WarningKind};
use crate::store::format::CQ_UNIT_SIZE_BYTES;

/// RocketMQ settings ringmq has no field for yet, each with what ignoring it means. A file that
/// sets one starts, and the warning names the key.
pub const NOT_SUPPORTED: &[(&str, &str)] = &[
    (
        "deleteWhen",
        "CommitLog retention runs every deleteCommitLogFilesInterval, not at a set hour",
    ),
    (
        "storePathCommitLog",
        "the CommitLog is always storePathRootDir/commitlog",
    ),
    (
        "storePathConsumeQueue",
        "ConsumeQueues are always under storePathRootDir/consumequeue",
    ),
    (
        "storePathIndex",
        "the message index is always under storePathRootDir/index",
    ),
    ("storeCheckpoint", "there is no checkpoint file"),
    ("abortFile", "there is no abort file"),
    (
        "brokerIP2",
        "the HA address registered is RINGMQ_BROKER_ADVERTISED_IP:RINGMQ_HA_LISTEN_PORT",
    ),
    ("enableDLegerCommitLog", "there is no DLedger CommitLog"),
    ("enableControllerMode", "there is no controller mode"),
    (
        "enableAcl",
        "not a RocketMQ key (Java ignores it too): ACL is switched on by aclEnable",
    ),
    ("rocketmqHome", "ringmq needs no home directory"),
    (
        "sendMessageThreadPoolNums",
        "requests run on the io_uring threads (RINGMQ_SERVER_WORKER_THREADS)",
    ),
    (
        "pullMessageThreadPoolNums",
        "requests run on the io_uring threads (RINGMQ_SERVER_WORKER_THREADS)",
    ),
    ("serverWorkerThreads", "see RINGMQ_SERVER_WORKER_THREADS"),
    (
        "flushCommitLogLeastPages",
        "an async flush syncs whatever was written",
    ),
    (
        "transientStorePoolEnable",
        "there is no transient store pool",
    ),
    (
        "warmMapedFileEnable",
        "no whole file is pre-touched; with sync flush RINGMQ_STORE_ZERO_AHEAD_BYTES writes zeros ahead of the write position",
    ),
    (
        "useReentrantLockWhenPutMessage",
        "appends take one writer lock",
    ),
    (
        "waitTimeMillsInSendQueue",
        "sends are not queued before the store",
    ),
    (
        "osPageCacheBusyTimeOutMills",
        "sends are not queued before the store",
    ),
    ("clusterTopicEnable", "no cluster-named topic is created"),
    ("brokerTopicEnable", "no broker-named topic is created"),
];

/// Spellings of releases before RocketMQ 4.3 renamed them; old files still carry them.
const OLD_SPELLINGS: &[(&str, &str)] = &[
    ("mapedFileSizeCommitLog", "mappedFileSizeCommitLog"),
    ("mapedFileSizeConsumeQueue", "mappedFileSizeConsumeQueue"),
];

/// The broker.conf key of a field: the first word of its RocketMQ column, when that is a Java
/// bean property name. The column may add a unit note after it
/// (`mappedFileSizeConsumeQueue / 20`); a dotted name is a JVM system property, which Java
/// reads from `-D`, not from the file (`com.rocketmq.remoting.frameMaxLength`).
pub fn java_key(spec: &FieldSpec) -> Option<&'static str> {
    let word = spec.rocketmq_name.split_whitespace().next()?;
    word.chars()
        .all(|c| c.is_ascii_alphanumeric())
        .then_some(word)
}

/// The field set by `key` in a file read by `process`. A key of two fields (`listenPort`: the
/// broker's and the name server's) sets the one of the reading process.
fn field_for(key: &str, process: Process) -> Option<usize> {
    let namesrv_field = |index: &usize| fields()[*index].env.starts_with("RINGMQ_NAMESRV_");
    let mut matches = fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| java_key(f) == Some(key))
        .map(|(index, _)| index);
    let first = matches.next()?;
    let Some(second) = matches.next() else {
        return Some(first);
    };
    let wanted = process == Process::Namesrv;
    [first, second]
        .into_iter()
        .find(|i| namesrv_field(i) == wanted)
}

/// Java's value in the unit of the ringmq field it sets. Only these fields differ:
///
/// - `mappedFileSizeConsumeQueue` is bytes, `RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS` counts
///   20-byte units: the bytes are divided by 20, rounded up as Java's `MessageStoreConfig`
///   rounds the size up to whole units.
///
/// Everything else is in Java's unit already (sizes in bytes, intervals in milliseconds,
/// `fileReservedTime` in hours, ratios in percent) and Java's names of values
/// (`ASYNC_FLUSH`, `SYNC_MASTER`, ...) are accepted by the fields' own parsers.
pub fn from_java_unit<'a>(env: &str, value: &'a str) -> Result<Cow<'a, str>, String> {
    match env {
        "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS" => {
            let bytes: u64 = value
                .parse()
                .map_err(|e| format!("not a whole number of bytes ({e})"))?;
            Ok(Cow::Owned(
                bytes.div_ceil(CQ_UNIT_SIZE_BYTES as u64).to_string(),
            ))
        }
        _ => Ok(Cow::Borrowed(value)),
    }
}

/// A field's value as Java writes it for `key` (the inverse of [`from_java_unit`], and Java's
/// names of values): what GET_BROKER_CONFIG answers.
pub fn to_java_value(spec: &FieldSpec, config: &super::sections::Config) -> String {
    let shown = spec.value(config);
    match spec.env {
        "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS" => shown.parse::<u64>().map_or(shown, |units| {
            (units * CQ_UNIT_SIZE_BYTES as u64).to_string()
        }),
        "RINGMQ_STORE_FLUSH_POLICY" => match shown.as_str() {
            "sync" => "SYNC_FLUSH".into(),
            _ => "ASYNC_FLUSH".into(),
        },
        _ => shown,
    }
}

/// Applies the entries of the file at `path` to `loaded`: bad values go to `errors`, keys that
/// set nothing to the warnings.
pub(super) fn apply(
    loaded: &mut LoadedConfig,
    path: &Path,
    entries: &[Property],
    process: Process,
    errors: &mut Vec<ConfigError>,
) {
    for entry in entries {
        let at = format!("{}:{}", path.display(), entry.line);
        let warn = |kind, message: String| ConfWarning {
            kind,
            at: at.clone(),
            key: entry.key.clone(),
            message,
        };
        let mut key = entry.key.as_str();
        if let Some(&(_, current)) = OLD_SPELLINGS.iter().find(|(old, _)| *old == key) {
            let message = format!("the spelling of RocketMQ before 4.3, read as {current}");
            loaded
                .warnings
                .push(warn(WarningKind::OldSpelling, message));
            key = current;
        }
        let Some(index) = field_for(key, process) else {
            let warning = match NOT_SUPPORTED.iter().find(|(k, _)| *k == key) {
                Some((_, why)) => warn(
                    WarningKind::NotSupported,
                    format!("not supported by ringmq yet, ignored ({why})"),
                ),
                None => warn(
                    WarningKind::UnknownKey,
                    "unknown key, ignored (as the Java broker ignores it)".into(),
                ),
            };
            loaded.warnings.push(warning);
            continue;
        };
        // Java keeps trailing blanks and then fails to parse "48 " (and ignores it silently);
        // a trailing blank is a slip, so it is trimmed.
        let value = entry.value.trim_end();
        let source = Source::File {
            path: path.to_path_buf(),
            line: entry.line,
            key: entry.key.clone(),
        };
        let applied = from_java_unit(fields()[index].env, value)
            .and_then(|text| loaded.set(index, &text, source));
        if let Err(reason) = applied {
            errors.push(ConfigError {
                var: entry.key.clone(),
                value: value.to_string(),
                reason,
                at: Some(at),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::provenance::ConfigInputs;
    use crate::config::source::layer;
    use crate::config::BrokerRole;
    use crate::config::{parse_properties, Config, ConfigErrors, FlushPolicy};

    const FILE: &str = "/etc/ringmq/broker.conf";

    fn load_as(
        process: Process,
        text: &str,
        env: &[(&str, &str)],
    ) -> Result<LoadedConfig, ConfigErrors> {
        let inputs = ConfigInputs {
            process,
            ..ConfigInputs::default()
        };
        let entries = parse_properties(text).expect("properties syntax");
        let vars = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        layer(&inputs, Some((Path::new(FILE), entries)), vars)
    }

    fn load(text: &str, env: &[(&str, &str)]) -> Result<LoadedConfig, ConfigErrors> {
        load_as(Process::Broker, text, env)
    }

    fn file_line(line: usize, key: &str) -> Source {
        Source::File {
            path: PathBuf::from(FILE),
            line,
            key: key.into(),
        }
    }

    #[test]
    fn java_keys_and_values_set_the_fields() {
        let text = "brokerClusterName = C1\nbrokerName=b1\nlistenPort: 20911\n\
                    flushDiskType=SYNC_FLUSH\nfileReservedTime=48\nbrokerIP1=10.0.0.7\n\
                    namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\nstorePathRootDir=/data/store\n\
                    mappedFileSizeCommitLog=104857600\nmappedFileSizeConsumeQueue=6000010\n\
                    transferMsgByHeap=false\naccessMessageInMemoryMaxRatio=30\n\
                    autoCreateTopicEnable=false\nslaveReadEnable=true\n";
        let c = load(text, &[]).unwrap().config;
        assert_eq!(c.broker.cluster_name, "C1");
        assert_eq!(c.broker.name, "b1");
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(
            c.namesrv.listen_port, 9876,
            "listenPort is the broker's here"
        );
        assert_eq!(c.store.flush_policy, FlushPolicy::Sync);
        assert_eq!(c.store.file_reserved_time_hours, 48);
        assert_eq!(c.broker.advertised_ip, "10.0.0.7");
        assert_eq!(c.namesrv.addr, "10.0.0.1:9876;10.0.0.2:9876");
        assert_eq!(c.store.root_dir, PathBuf::from("/data/store"));
        assert_eq!(c.store.commit_log_file_size_bytes, 104_857_600);
        // Bytes to 20-byte units, rounded up.
        assert_eq!(c.store.consume_queue_file_units, 300_001);
        assert_eq!(c.transfer.msg_by_heap, Some(false));
        assert_eq!(c.store.access_message_in_memory_max_ratio_percent, 30);
        assert!(!c.broker.auto_create_topic_enabled);
        assert!(c.broker.slave_read_enabled);
    }

    #[test]
    fn a_name_server_file_sets_the_name_servers_port() {
        let loaded = load_as(Process::Namesrv, "listenPort=19876\n", &[]).unwrap();
        assert_eq!(loaded.config.namesrv.listen_port, 19876);
        assert_eq!(loaded.config.broker.listen_port, 10911);
        assert_eq!(
            loaded.source_of("RINGMQ_NAMESRV_LISTEN_PORT"),
            Some(&file_line(1, "listenPort"))
        );
    }

    #[test]
    fn env_beats_the_file_and_the_file_beats_the_defaults() {
        let text = "brokerName=from-file\nlistenPort=20911\n";
        let loaded = load(text, &[("RINGMQ_BROKER_LISTEN_PORT", "30911")]).unwrap();
        assert_eq!(loaded.config.broker.name, "from-file");
        assert_eq!(loaded.config.broker.listen_port, 30911);
        assert_eq!(
            loaded.source_of("RINGMQ_BROKER_NAME"),
            Some(&file_line(1, "brokerName"))
        );
        assert_eq!(
            loaded.source_of("RINGMQ_BROKER_LISTEN_PORT"),
            Some(&Source::Env)
        );
        assert_eq!(
            loaded.source_of("RINGMQ_STORE_FLUSH_POLICY"),
            Some(&Source::Default)
        );
        let shown = loaded.describe();
        assert!(
            shown.contains(&format!(
                "RINGMQ_BROKER_NAME=from-file  # {FILE}:1 brokerName\n"
            )),
            "{shown}"
        );
        assert!(shown.contains("RINGMQ_BROKER_LISTEN_PORT=30911  # env\n"));
        assert!(shown.contains("RINGMQ_STORE_FLUSH_POLICY=async  # default\n"));
    }

    #[test]
    fn the_n_flag_beats_file_and_env() {
        let inputs = ConfigInputs {
            namesrv_addr: Some("10.0.0.9:9876".into()),
            ..ConfigInputs::default()
        };
        let entries = parse_properties("namesrvAddr=10.0.0.1:9876").unwrap();
        let vars = [(
            "RINGMQ_NAMESRV_ADDR".to_string(),
            "10.0.0.2:9876".to_string(),
        )];
        let loaded = layer(&inputs, Some((Path::new(FILE), entries)), vars).unwrap();
        assert_eq!(loaded.config.namesrv.addr, "10.0.0.9:9876");
        assert_eq!(
            loaded.source_of("RINGMQ_NAMESRV_ADDR"),
            Some(&Source::Flag("-n"))
        );
    }

    #[test]
    fn unknown_and_unsupported_keys_are_warnings_by_name() {
        let text = "brokerName=b\nfooBarBaz=1\ndeleteWhen=04\nmapedFileSizeCommitLog=104857600\n";
        let loaded = load(text, &[]).unwrap();
        let kinds: Vec<(WarningKind, &str, &str)> = loaded
            .warnings
            .iter()
            .map(|w| (w.kind, w.key.as_str(), w.at.as_str()))
            .collect();
        let at = |line| format!("{FILE}:{line}");
        assert_eq!(
            kinds,
            vec![
                (WarningKind::UnknownKey, "fooBarBaz", at(2).as_str()),
                (WarningKind::NotSupported, "deleteWhen", at(3).as_str()),
                (
                    WarningKind::OldSpelling,
                    "mapedFileSizeCommitLog",
                    at(4).as_str()
                ),
            ]
        );
        assert_eq!(loaded.config.store.commit_log_file_size_bytes, 104_857_600);
        let shown = loaded.describe();
        assert!(
            shown.contains(&format!("# warning: {FILE}:2: fooBarBaz: unknown key")),
            "{shown}"
        );
    }

    #[test]
    fn bad_values_name_key_file_line_value_and_reason() {
        let text = "brokerName=b\nlistenPort=70000\nflushDiskType=SOMETIMES\n\
                    mappedFileSizeConsumeQueue=lots\n";
        let err = load(text, &[]).unwrap_err();
        let text = err.to_string();
        assert_eq!(err.0.len(), 3, "{text}");
        assert!(
            text.contains(&format!(
                "{FILE}:2: listenPort=\"70000\" is invalid: not a whole"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("{FILE}:3: flushDiskType=\"SOMETIMES\" is invalid")),
            "{text}"
        );
        assert!(text.contains("ASYNC_FLUSH / SYNC_FLUSH"), "{text}");
        assert!(
            text.contains(&format!("{FILE}:4: mappedFileSizeConsumeQueue=\"lots\"")),
            "{text}"
        );
    }

    #[test]
    fn a_broken_relation_names_the_line_that_set_it() {
        // A slave with the master's id: the check of validate, located in the file.
        let err = load("brokerRole=SLAVE\nbrokerId=0\n", &[]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!(
                "{FILE}:2 brokerId: RINGMQ_BROKER_ID=\"0\" is invalid"
            )),
            "{text}"
        );
    }

    #[test]
    fn a_slave_and_a_sync_master_load_without_a_role_warning() {
        let slave = load("brokerRole=SLAVE\nbrokerId=1\n", &[]).unwrap();
        assert_eq!(slave.config.broker.role, BrokerRole::Slave);
        let master = load("brokerRole=SYNC_MASTER\nhaListenPort=30912\n", &[]).unwrap();
        assert_eq!(master.config.ha.listen_port, 30912);
        assert!(
            !master.warnings.iter().any(|w| w.key == "brokerRole"),
            "{:?}",
            master.warnings
        );
        assert!(Config::from_pairs(&[]).is_ok());
    }

    #[test]
    fn every_java_key_of_the_table_reaches_its_field() {
        for (index, spec) in fields().iter().enumerate() {
            let Some(key) = java_key(spec) else {
                continue;
            };
            let process = if spec.env.starts_with("RINGMQ_NAMESRV_") {
                Process::Namesrv
            } else {
                Process::Broker
            };
            assert_eq!(
                field_for(key, process),
                Some(index),
                "{key} should set {}",
                spec.env
            );
            assert!(
                !NOT_SUPPORTED.iter().any(|(k, _)| *k == key),
                "{key} has a field"
            );
        }
        assert_eq!(
            java_key(&fields()[field_for("listenPort", Process::Broker).unwrap()]),
            Some("listenPort")
        );
    }

    #[test]
    fn docs_config_md_names_every_key_not_supported_yet() {
        let doc = include_str!("../../docs/CONFIG.md");
        let section = doc
            .split("**Known but not supported yet**")
            .nth(1)
            .and_then(|rest| rest.split("- **Roles**").next())
            .expect("docs/CONFIG.md has the not-supported list");
        for (key, _) in NOT_SUPPORTED {
            assert!(
                section.contains(&format!("`{key}`")),
                "docs/CONFIG.md should list {key}"
            );
        }
        for (old, _) in OLD_SPELLINGS {
            assert!(doc.contains(&format!("`{old}`")), "{old}");
        }
    }
}
