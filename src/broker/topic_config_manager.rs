//! Topic configurations (Java `TopicConfigManager`; names are checked by
//! [`crate::common::topic_validator`]), persisted to
//! `config/topics.json`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::config_manager::{
    self as persist, BackupUsed, Loaded, MetadataFs, PersistError, PersistGate,
};
use crate::common::now_ms;
use crate::remoting::body::{perm, DataVersion, TopicConfig, TopicConfigSerializeWrapper};

/// The auto-create template topic.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
pub use crate::common::topic_validator::{
    dlq_topic, retry_topic, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX,
};
/// Java `SCHEDULE_TOPIC_XXXX` has one queue per delay level; 18 by default.
pub const SCHEDULE_TOPIC_QUEUE_NUMS: i32 = 18;

/// Topics a producer may not send to (Java `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    SCHEDULE_TOPIC,
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    // Java `TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC`.
    "TRANS_CHECK_MAX_TIME_TOPIC",
];

/// Whether producers may send to `topic`.
pub fn is_send_allowed(topic: &str) -> bool {
    !NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// Settings the manager needs from the broker config.
#[derive(Debug, Clone)]
pub struct TopicDefaults {
    pub cluster_name: String,
    pub broker_name: String,
    pub auto_create_topic_enabled: bool,
    pub default_topic_queue_nums: i32,
}

/// Topic name to config, hashed with foldhash (every send and pull looks its topic up; SipHash
/// showed in the wake thread's profile).
type TopicTable = HashMap<String, Arc<TopicConfig>, foldhash::fast::RandomState>;

/// The topic table and its file.
pub struct TopicConfigManager {
    /// Configs are shared (`Arc`) so a send or pull looks one up without copying it.
    table: RwLock<TopicTable>,
    data_version: RwLock<DataVersion>,
    path: PathBuf,
    /// Topics created by sends and send-backs mark it; the persister writes them (see
    /// [`PersistGate`]).
    pub gate: PersistGate,
    /// Where the file is written (the store's file system).
    pub fs: MetadataFs,
}

fn topic(name: &str, read: i32, write: i32, perm_bits: i32) -> TopicConfig {
    TopicConfig {
        topic_name: name.to_string(),
        read_queue_nums: read,
        write_queue_nums: write,
        perm: perm_bits,
        ..TopicConfig::default()
    }
}

impl TopicConfigManager {
    /// The built-in topics of Java's `TopicConfigManager` constructor, plus whatever
    /// `config/topics.json` holds.
    pub fn new(store_root: &Path, defaults: &TopicDefaults) -> Self {
        let rw = perm::PERM_READ | perm::PERM_WRITE;
        let mut table = TopicTable::default();
        let mut add = |t: TopicConfig| {
            table.insert(t.topic_name.clone(), Arc::new(t));
        };
        add(topic(SELF_TEST_TOPIC, 1, 1, rw));
        if defaults.auto_create_topic_enabled {
            let n = defaults.default_topic_queue_nums;
            add(topic(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                n,
                n,
                rw | perm::PERM_INHERIT,
            ));
        }
        add(topic(BENCHMARK_TOPIC, 1024, 1024, rw));
        add(topic(
            &defaults.cluster_name,
            16,
            16,
            rw | perm::PERM_INHERIT,
        ));
        add(topic(&defaults.broker_name, 1, 1, rw | perm::PERM_INHERIT));
        add(topic(OFFSET_MOVED_EVENT, 1, 1, rw));
        add(topic(
            SCHEDULE_TOPIC,
            SCHEDULE_TOPIC_QUEUE_NUMS,
            SCHEDULE_TOPIC_QUEUE_NUMS,
            rw,
        ));
        add(topic(
            &format!("{}_REPLY_TOPIC", defaults.cluster_name),
            1,
            1,
            rw,
        ));
        TopicConfigManager {
            table: RwLock::new(table),
            data_version: RwLock::new(DataVersion {
                counter: 0,
                state_version: 0,
                timestamp: now_ms(),
            }),
            path: store_root.join("config").join("topics.json"),
            gate: PersistGate::default(),
            fs: MetadataFs::default(),
        }
    }

    /// Loads `topics.json` (or its backup) over the built-ins. Says whether the backup was
    /// used.
    pub fn load(&self) -> Result<Option<BackupUsed>, PersistError> {
        let parse = persist::parse_json::<TopicConfigSerializeWrapper>;
        let (wrapper, backup_used) = match persist::load_with_backup(&self.path, parse)? {
            Loaded::Missing => return Ok(None),
            Loaded::Main(w) => (w, None),
            Loaded::Backup(w, used) => (w, Some(used)),
        };
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        for (name, mut tc) in wrapper.topic_config_table {
            if tc.topic_name.is_empty() {
                tc.topic_name = name.clone();
            }
            table.insert(name, Arc::new(tc));
        }
        *self.data_version.write().unwrap_or_else(|p| p.into_inner()) = wrapper.data_version;
        Ok(backup_used)
    }

    /// Writes `topics.json` now.
    pub fn persist(&self) -> Result<(), PersistError> {
        self.gate.persist(|| self.write_file())
    }

    /// Writes `topics.json` if a topic was created since the last write.
    pub fn persist_if_dirty(&self) -> Result<bool, PersistError> {
        self.gate.persist_if_dirty(|| self.write_file())
    }

    /// Resolves once every topic created so far is in `topics.json` (see
    /// [`PersistGate::wait_written`]): a send that created its topic is answered after that, so
    /// an acknowledged message's topic survives a crash, as with Java's synchronous write.
    pub async fn wait_persisted(&self) -> Result<(), PersistError> {
        let generation = self.gate.last_marked();
        self.gate
            .wait_written(generation, || self.write_file())
            .await
    }

    fn write_file(&self) -> Result<(), PersistError> {
        let wrapper = self.wrapper();
        let text = serde_json::to_string(&wrapper).map_err(|e| PersistError::Io {
            op: "encode",
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        persist::write_atomically_on(self.fs.get(), &self.path, text.as_bytes())
    }

    /// The table as the name server and GET_ALL_TOPIC_CONFIG want it.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        let table = self.table.read().unwrap_or_else(|p| p.into_inner());
        TopicConfigSerializeWrapper {
            data_version: *self.data_version.read().unwrap_or_else(|p| p.into_inner()),
            topic_config_table: table
                .iter()
                .map(|(k, v)| (k.clone(), TopicConfig::clone(v)))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    pub fn select(&self, topic: &str) -> Option<Arc<TopicConfig>> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(topic)
            .cloned()
    }

    pub fn topic_names(&self) -> Vec<String> {
        self.table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Java `dataVersion.nextVersion()`: makes the next registration carry the table again
    /// (a broker permission change re-registers every topic).
    pub fn bump_version(&self) {
        let mut v = self.data_version.write().unwrap_or_else(|p| p.into_inner());
        v.counter += 1;
        v.timestamp = now_ms();
    }

    /// A slave's copy of its master's table (Java `syncTopicConfig`): when the master's data
    /// version differs from ours, its table replaces ours whole and its version becomes ours.
    /// Persists. Returns whether anything changed.
    pub fn replace_from_master(
        &self,
        master: TopicConfigSerializeWrapper,
    ) -> Result<bool, PersistError> {
        if *self.data_version.read().unwrap_or_else(|p| p.into_inner()) == master.data_version {
            return Ok(false);
        }
        let table = master
            .topic_config_table
            .into_iter()
            .map(|(name, mut tc)| {
                if tc.topic_name.is_empty() {
                    tc.topic_name = name.clone();
                }
                (name, Arc::new(tc))
            })
            .collect();
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = table;
        *self.data_version.write().unwrap_or_else(|p| p.into_inner()) = master.data_version;
        self.persist()?;
        Ok(true)
    }

    /// Creates or replaces a topic (UPDATE_AND_CREATE_TOPIC). Persists.
    pub fn update_topic_config(&self, tc: TopicConfig) -> Result<(), PersistError> {
        self.table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tc.topic_name.clone(), Arc::new(tc));
        self.bump_version();
        self.persist()
    }

    /// Java `deleteTopicConfig`: removes the topic, bumps the data version and persists when
    /// it existed. Says whether it existed.
    pub fn delete_topic_config(&self, topic: &str) -> Result<bool, PersistError> {
        let removed = self
            .table
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(topic)
            .is_some();
        if removed {
            self.bump_version();
            self.persist()?;
        }
        Ok(removed)
    }

    /// Java `createTopicInSendMessageMethod`: a send to a missing topic creates it from the
    /// `default_topic` template when that template exists with PERM_INHERIT. The new topic has
    /// `min(client_default_queue_nums, template.writeQueueNums)` queues and the template's perm
    /// without INHERIT. Returns the config and whether it was created now. A new topic is
    /// written by the persister, not before the send is answered.
    pub fn create_topic_in_send_message_method(
        &self,
        topic: &str,
        default_topic: &str,
        client_default_queue_nums: i32,
        topic_sys_flag: i32,
    ) -> Result<Option<(TopicConfig, bool)>, PersistError> {
        let created = {
            let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
            if let Some(tc) = table.get(topic) {
                return Ok(Some((TopicConfig::clone(tc), false)));
            }
            let Some(template) = table.get(default_topic) else {
                return Ok(None);
            };
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC
                && !table.contains_key(AUTO_CREATE_TOPIC_KEY_TOPIC)
            {
                return Ok(None);
            }
            if template.perm & perm::PERM_INHERIT == 0 {
                return Ok(None);
            }
            let queues = client_default_queue_nums.clamp(1, template.write_queue_nums.max(1));
            let tc = TopicConfig {
                topic_name: topic.to_string(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: template.perm & !perm::PERM_INHERIT,
                topic_sys_flag,
                topic_filter_type: template.topic_filter_type,
                ..TopicConfig::default()
            };
            table.insert(topic.to_string(), Arc::new(tc.clone()));
            tc
        };
        self.bump_version();
        self.gate.mark();
        Ok(Some((created, true)))
    }

    /// Java `createTopicInSendMessageBackMethod` (retry and DLQ topics): created with the given
    /// queues and perm if missing. Returns the config and whether it was created now; the
    /// persister writes a new one.
    pub fn create_topic_if_absent(
        &self,
        topic: &str,
        queue_nums: i32,
        perm_bits: i32,
        topic_sys_flag: i32,
    ) -> Result<(TopicConfig, bool), PersistError> {
        let created = {
            let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
            if let Some(tc) = table.get(topic) {
                return Ok((TopicConfig::clone(tc), false));
            }
            let mut tc = self::topic(topic, queue_nums, queue_nums, perm_bits);
            tc.topic_sys_flag = topic_sys_flag;
            table.insert(topic.to_string(), Arc::new(tc.clone()));
            tc
        };
        self.bump_version();
        self.gate.mark();
        Ok((created, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> TopicDefaults {
        TopicDefaults {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            auto_create_topic_enabled: true,
            default_topic_queue_nums: 8,
        }
    }

    #[test]
    fn system_topics_refuse_sends() {
        assert!(!is_send_allowed(SCHEDULE_TOPIC));
        assert!(is_send_allowed("TopicTest"));
    }

    #[test]
    fn auto_create_from_template_clamps_queues_and_drops_inherit() {
        let dir = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::new(dir.path(), &defaults());
        let (tc, created) = m
            .create_topic_in_send_message_method("T", AUTO_CREATE_TOPIC_KEY_TOPIC, 16, 0)
            .unwrap()
            .unwrap();
        assert!(created);
        assert_eq!(tc.write_queue_nums, 8, "clamped to the template's 8");
        assert_eq!(tc.perm, perm::PERM_READ | perm::PERM_WRITE);
        let (_, again) = m
            .create_topic_in_send_message_method("T", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
            .unwrap()
            .unwrap();
        assert!(!again);
        // A template without INHERIT cannot create topics.
        assert!(m
            .create_topic_in_send_message_method("U", "T", 4, 0)
            .unwrap()
            .is_none());
        // Reload from disk, once the persister wrote the marked table.
        assert!(m.persist_if_dirty().unwrap());
        let m2 = TopicConfigManager::new(dir.path(), &defaults());
        m2.load().unwrap();
        assert_eq!(m2.select("T").unwrap().read_queue_nums, 8);
    }

    #[test]
    fn auto_create_can_be_disabled() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = defaults();
        d.auto_create_topic_enabled = false;
        let m = TopicConfigManager::new(dir.path(), &d);
        assert!(m.select(AUTO_CREATE_TOPIC_KEY_TOPIC).is_none());
        assert!(m
            .create_topic_in_send_message_method("T", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
            .unwrap()
            .is_none());
    }
}
