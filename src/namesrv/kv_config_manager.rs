//! The name server's KV config (Java `KVConfigManager`): namespaces of string keys and values,
//! set by PUT_KV_CONFIG and read by GET_KV_CONFIG / GET_KVLIST_BY_NAMESPACE (clients read the
//! `ORDER_TOPIC_CONFIG` namespace for ordered topics). Every change is written to
//! `kvConfig.json` (Java's `KVConfigSerializeWrapper`: `{"configTable":{ns:{key:value}}}`)
//! before the request is answered, through a temporary file, fsync and rename.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

use crate::remoting::body::json::{lenient, parse_lenient};

/// Most keys the table holds over all namespaces: a put of a new key beyond it is refused, so
/// clients cannot grow the name server's memory and file without bound.
pub const KV_CONFIG_ENTRIES_MAX: usize = 100_000;

/// Java `KVConfigSerializeWrapper`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct KvConfigFile {
    #[serde(deserialize_with = "lenient")]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KvConfigError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a KV config file: {reason}")]
    Content { path: PathBuf, reason: String },
    #[error("the KV config holds {max} keys already; delete some first")]
    Full { max: usize },
}

/// The table and its file.
#[derive(Debug)]
pub struct KvConfigManager {
    table: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
    /// `None`: kept in memory only (unit tests).
    path: Option<PathBuf>,
}

impl Default for KvConfigManager {
    fn default() -> Self {
        Self {
            table: RwLock::new(BTreeMap::new()),
            path: None,
        }
    }
}

impl KvConfigManager {
    /// Loads `path` (a missing file is an empty table).
    pub fn load(path: &Path) -> Result<Self, KvConfigError> {
        let table = match std::fs::read(path) {
            Ok(bytes) => {
                parse_lenient::<KvConfigFile>(&bytes, "KVConfigSerializeWrapper")
                    .map_err(|e| KvConfigError::Content {
                        path: path.to_path_buf(),
                        reason: e.to_string(),
                    })?
                    .config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(KvConfigError::Io {
                    op: "read",
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Ok(Self {
            table: RwLock::new(table),
            path: Some(path.to_path_buf()),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, BTreeMap<String, String>>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, BTreeMap<String, String>>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Java `putKVConfig`.
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        let mut table = self.write();
        let exists = table.get(namespace).is_some_and(|ns| ns.contains_key(key));
        let entries: usize = table.values().map(BTreeMap::len).sum();
        if !exists && entries >= KV_CONFIG_ENTRIES_MAX {
            return Err(KvConfigError::Full {
                max: KV_CONFIG_ENTRIES_MAX,
            });
        }
        table
            .entry(namespace.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self.persist(&table)
    }

    /// Java `getKVConfig`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.read().get(namespace)?.get(key).cloned()
    }

    /// Java `deleteKVConfig` (the namespace stays, empty).
    pub fn delete(&self, namespace: &str, key: &str) -> Result<(), KvConfigError> {
        let mut table = self.write();
        let removed = table
            .get_mut(namespace)
            .and_then(|ns| ns.remove(key))
            .is_some();
        if removed {
            self.persist(&table)?;
        }
        Ok(())
    }

    /// Java `getKVListByNamespace`: the namespace's table, `None` when it does not exist.
    pub fn namespace(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.read().get(namespace).cloned()
    }

    /// Writes the table (called with the write lock held, so writes do not interleave).
    fn persist(
        &self,
        table: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<(), KvConfigError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let text = serde_json::json!({ "configTable": table }).to_string();
        write_atomically(path, text.as_bytes())
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), KvConfigError> {
    let io = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| KvConfigError::Io {
            op,
            path: p,
            source,
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create dir", dir))?;
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io("create", &tmp))?;
    file.write_all(bytes).map_err(io("write", &tmp))?;
    file.sync_all().map_err(io("fsync", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io("rename", path))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync dir", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_persist_in_java_shape_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv").join("kvConfig.json");
        let kv = KvConfigManager::load(&path).unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4").unwrap();
        kv.put("ns", "k", "v").unwrap();
        kv.delete("ns", "k").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns":{}}}"#
        );
        let again = KvConfigManager::load(&path).unwrap();
        assert_eq!(
            again.get("ORDER_TOPIC_CONFIG", "T").as_deref(),
            Some("broker-a:4")
        );
        assert_eq!(again.namespace("ns"), Some(BTreeMap::new()));
        assert_eq!(again.namespace("none"), None);
    }

    #[test]
    fn a_java_file_with_numbers_reads_and_a_broken_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, r#"{"configTable":{"ns":{"k":7}},"x":1}"#).unwrap();
        assert_eq!(
            KvConfigManager::load(&path)
                .unwrap()
                .get("ns", "k")
                .as_deref(),
            Some("7")
        );
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            KvConfigManager::load(&path),
            Err(KvConfigError::Content { .. })
        ));
    }
}
