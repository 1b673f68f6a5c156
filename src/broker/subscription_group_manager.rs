//! Subscription groups (Java `SubscriptionGroupManager`, `SubscriptionGroupConfig`), persisted to
//! `config/subscriptionGroup.json`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Deserializer, Serialize};

use crate::remoting::body::json::{lenient, LenientField};

use super::config_manager::{
    self as persist, BackupUsed, Loaded, MetadataFs, PersistError, PersistGate,
};
use crate::common::topic_validator::validate_group;

/// Java `SubscriptionGroupConfig` with its defaults. Unknown members of files written by Java
/// (groupRetryPolicy, attributes, ...) are ignored on load.
///
/// Read as fastjson reads it (numbers as strings, booleans as 0/1, `null` as Java's default):
/// operators write `brokerId` / `whichBrokerWhenConsumeSlowly` by hand for the read split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    #[serde(deserialize_with = "lenient")]
    pub group_name: String,
    #[serde(deserialize_with = "true_unless_false")]
    pub consume_enable: bool,
    #[serde(deserialize_with = "true_unless_false")]
    pub consume_from_min_enable: bool,
    #[serde(deserialize_with = "true_unless_false")]
    pub consume_broadcast_enable: bool,
    #[serde(deserialize_with = "lenient")]
    pub consume_message_orderly: bool,
    #[serde(deserialize_with = "retry_queue_nums")]
    pub retry_queue_nums: i32,
    #[serde(deserialize_with = "retry_max_times")]
    pub retry_max_times: i32,
    #[serde(deserialize_with = "lenient")]
    pub broker_id: i64,
    #[serde(deserialize_with = "which_broker_when_consume_slowly")]
    pub which_broker_when_consume_slowly: i64,
    #[serde(deserialize_with = "true_unless_false")]
    pub notify_consumer_ids_changed_enable: bool,
    #[serde(deserialize_with = "lenient")]
    pub group_sys_flag: i32,
    #[serde(deserialize_with = "consume_timeout_minute")]
    pub consume_timeout_minute: i32,
}

/// A member whose Java default is not the type's zero: `null` leaves the default.
macro_rules! lenient_or {
    ($name:ident, $t:ty, $default:expr) => {
        fn $name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<$t, D::Error> {
            Ok(Option::<$t>::deserialize_lenient(deserializer)?.unwrap_or($default))
        }
    };
}
lenient_or!(true_unless_false, bool, true);
lenient_or!(retry_queue_nums, i32, 1);
lenient_or!(retry_max_times, i32, 16);
lenient_or!(which_broker_when_consume_slowly, i64, 1);
lenient_or!(consume_timeout_minute, i32, 15);

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        SubscriptionGroupConfig {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout_minute: 15,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GroupFile {
    #[serde(deserialize_with = "crate::remoting::body::json::null_as_default")]
    subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// Group names Java's `SubscriptionGroupManager` creates at start.
const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_SYS_RMQ_TRANS",
];

/// Group name to config, hashed with foldhash (every pull looks its group up).
type GroupTable = HashMap<String, Arc<SubscriptionGroupConfig>, foldhash::fast::RandomState>;

pub struct SubscriptionGroupManager {
    /// Shared (`Arc`) so every pull looks its group up without copying it.
    table: RwLock<GroupTable>,
    auto_create: bool,
    path: PathBuf,
    /// Auto-created groups mark it; the persister writes them (see [`PersistGate`]).
    pub gate: PersistGate,
    /// Where the file is written (the store's file system).
    pub fs: MetadataFs,
}

impl SubscriptionGroupManager {
    pub fn new(store_root: &Path, auto_create: bool) -> Self {
        let table = SYSTEM_GROUPS
            .iter()
            .map(|g| {
                let c = SubscriptionGroupConfig {
                    group_name: g.to_string(),
                    ..Default::default()
                };
                (g.to_string(), Arc::new(c))
            })
            .collect();
        SubscriptionGroupManager {
            table: RwLock::new(table),
            auto_create,
            path: store_root.join("config").join("subscriptionGroup.json"),
            gate: PersistGate::default(),
            fs: MetadataFs::default(),
        }
    }

    /// Loads `subscriptionGroup.json` (or its backup) over the system groups. Says whether the
    /// backup was used.
    pub fn load(&self) -> Result<Option<BackupUsed>, PersistError> {
        let parse = persist::parse_json::<GroupFile>;
        let (file, backup_used) = match persist::load_with_backup(&self.path, parse)? {
            Loaded::Missing => return Ok(None),
            Loaded::Main(f) => (f, None),
            Loaded::Backup(f, used) => (f, Some(used)),
        };
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        for (name, mut c) in file.subscription_group_table {
            if c.group_name.is_empty() {
                c.group_name = name.clone();
            }
            table.insert(name, Arc::new(c));
        }
        Ok(backup_used)
    }

    /// Writes `subscriptionGroup.json` now.
    pub fn persist(&self) -> Result<(), PersistError> {
        self.gate.persist(|| self.write_file())
    }

    /// Writes `subscriptionGroup.json` if a group was created since the last write.
    pub fn persist_if_dirty(&self) -> Result<bool, PersistError> {
        self.gate.persist_if_dirty(|| self.write_file())
    }

    fn write_file(&self) -> Result<(), PersistError> {
        let file = GroupFile {
            subscription_group_table: self
                .table
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), SubscriptionGroupConfig::clone(v)))
                .collect(),
        };
        let text = serde_json::to_string(&file).map_err(|e| PersistError::Io {
            op: "encode",
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        persist::write_atomically_on(self.fs.get(), &self.path, text.as_bytes())
    }

    pub fn find(&self, group: &str) -> Option<Arc<SubscriptionGroupConfig>> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(group)
            .cloned()
    }

    /// Java `findSubscriptionGroupConfig`: the group, auto-created with defaults when
    /// `autoCreateSubscriptionGroup` is on and the name passes [`validate_group`]. Creating
    /// marks the table for the persister (a heartbeat does not wait for the file). A name that fails is an unknown group, as in Java, so send-back,
    /// pull and heartbeat answer it as they answer any unknown group, and nothing (retry
    /// topic, offsets, consumer table) is ever keyed by it.
    pub fn find_or_auto_create(
        &self,
        group: &str,
    ) -> Result<Option<Arc<SubscriptionGroupConfig>>, PersistError> {
        if let Some(c) = self.find(group) {
            return Ok(Some(c));
        }
        if !self.auto_create {
            return Ok(None);
        }
        if let Err(e) = validate_group(group) {
            tracing::debug!(reason = %e, "subscription group not auto-created");
            return Ok(None);
        }
        let c = self
            .table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(group.to_string())
            .or_insert_with(|| {
                Arc::new(SubscriptionGroupConfig {
                    group_name: group.to_string(),
                    ..Default::default()
                })
            })
            .clone();
        self.gate.mark();
        Ok(Some(c))
    }

    pub fn update(&self, c: SubscriptionGroupConfig) -> Result<(), PersistError> {
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.group_name.clone(), Arc::new(c));
        self.persist()
    }

    /// A slave's copy of its master's groups (Java `syncSubscriptionGroupConfig`): they
    /// replace ours whole. Persists when anything changed.
    pub fn replace_from_master(
        &self,
        master: BTreeMap<String, SubscriptionGroupConfig>,
    ) -> Result<(), PersistError> {
        let table: GroupTable = master
            .into_iter()
            .map(|(name, mut c)| {
                if c.group_name.is_empty() {
                    c.group_name = name.clone();
                }
                (name, Arc::new(c))
            })
            .collect();
        {
            let mut current = self.table.write().unwrap_or_else(|p| p.into_inner());
            if *current == table {
                return Ok(());
            }
            *current = table;
        }
        self.persist()
    }

    /// Java `deleteSubscriptionGroupConfig`: removes the group and persists when it existed.
    /// Says whether it existed.
    pub fn delete(&self, group: &str) -> Result<bool, PersistError> {
        let removed = self
            .table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(group)
            .is_some();
        if removed {
            self.persist()?;
        }
        Ok(removed)
    }

    pub fn all(&self) -> BTreeMap<String, SubscriptionGroupConfig> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), SubscriptionGroupConfig::clone(v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_create_persists_and_reloads_with_java_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), true);
        let c = m.find_or_auto_create("cg").unwrap().unwrap();
        assert_eq!(c.retry_max_times, 16);
        assert_eq!(c.which_broker_when_consume_slowly, 1);
        // Creating only marks the table; the persister's write puts it in the file, once.
        assert!(!dir.path().join("config/subscriptionGroup.json").exists());
        assert!(m.persist_if_dirty().unwrap());
        assert!(!m.persist_if_dirty().unwrap(), "nothing changed since");
        let m2 = SubscriptionGroupManager::new(dir.path(), true);
        m2.load().unwrap();
        assert_eq!(m2.find("cg"), Some(c));
    }

    #[test]
    fn a_group_name_java_refuses_is_never_auto_created() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), true);
        for bad in ["../../x\u{1}", "", "a@b", &"g".repeat(121)] {
            assert_eq!(m.find_or_auto_create(bad).unwrap(), None, "{bad:?}");
            assert_eq!(m.find(bad), None);
        }
        assert!(m.find_or_auto_create(&"g".repeat(120)).unwrap().is_some());
    }

    #[test]
    fn no_auto_create_means_unknown_group() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), false);
        assert_eq!(m.find_or_auto_create("cg").unwrap(), None);
        assert!(m.find("TOOLS_CONSUMER").is_some());
    }

    #[test]
    fn update_bodies_from_java_and_cpp_clients_read_alike() {
        use crate::remoting::body::json::parse_lenient;
        // Java 5.x mqadmin (fastjson, sorted, 5.x members ringmq does not keep).
        let java = br#"{"attributes":{},"brokerId":1,"consumeBroadcastEnable":false,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"g","groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000]}},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":3,"retryQueueNums":1,"subscriptionDataSet":null,"whichBrokerWhenConsumeSlowly":1}"#;
        // A C++-style writer: numbers and booleans as strings, members missing.
        let cpp = br#"{"groupName":"g","brokerId":"1","consumeBroadcastEnable":"false","retryMaxTimes":"3"}"#;
        let a: SubscriptionGroupConfig = parse_lenient(java, "SubscriptionGroupConfig").unwrap();
        let b: SubscriptionGroupConfig = parse_lenient(cpp, "SubscriptionGroupConfig").unwrap();
        assert_eq!(a, b);
        assert_eq!((a.broker_id, a.retry_max_times), (1, 3));
        assert!(!a.consume_broadcast_enable && a.consume_enable);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,"consumeBroadcastEnable":false,"consumeMessageOrderly":false,"retryQueueNums":1,"retryMaxTimes":3,"brokerId":1,"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true,"groupSysFlag":0,"consumeTimeoutMinute":15}"#
        );
    }

    #[test]
    fn loads_java_file_with_unknown_members() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), false);
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/subscriptionGroup.json"),
            r#"{"dataVersion":{"counter":1,"timestamp":1},"forbiddenTable":{},"subscriptionGroupTable":{"g1":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"groupName":"g1","groupRetryPolicy":{"type":"CUSTOMIZED"},"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#,
        )
        .unwrap();
        m.load().unwrap();
        let g = m.find("g1").unwrap();
        assert!(!g.consume_enable);
        assert_eq!(g.retry_max_times, 3);
    }

    #[test]
    fn read_split_members_are_read_leniently() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), false);
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/subscriptionGroup.json"),
            r#"{"subscriptionGroupTable":{"g1":{"groupName":"g1","brokerId":"0","whichBrokerWhenConsumeSlowly":"2","consumeEnable":"true","retryMaxTimes":null},"g2":{"whichBrokerWhenConsumeSlowly":null,"consumeBroadcastEnable":0}}}"#,
        )
        .unwrap();
        m.load().unwrap();
        let g1 = m.find("g1").unwrap();
        assert_eq!((g1.broker_id, g1.which_broker_when_consume_slowly), (0, 2));
        assert!(g1.consume_enable);
        assert_eq!(g1.retry_max_times, 16);
        let g2 = m.find("g2").unwrap();
        assert_eq!(g2.group_name, "g2");
        assert_eq!(g2.which_broker_when_consume_slowly, 1);
        assert!(!g2.consume_broadcast_enable);
    }

    #[test]
    fn a_masters_groups_replace_the_slaves() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::new(dir.path(), false);
        let mut master = BTreeMap::new();
        master.insert(
            "cg".to_string(),
            SubscriptionGroupConfig {
                which_broker_when_consume_slowly: 2,
                ..Default::default()
            },
        );
        m.replace_from_master(master).unwrap();
        assert_eq!(m.find("cg").unwrap().which_broker_when_consume_slowly, 2);
        assert_eq!(m.find("cg").unwrap().group_name, "cg");
        assert!(
            m.find("TOOLS_CONSUMER").is_none(),
            "the master's table is taken whole"
        );
        let m2 = SubscriptionGroupManager::new(dir.path(), false);
        m2.load().unwrap();
        assert!(m2.find("cg").is_some());
    }
}
