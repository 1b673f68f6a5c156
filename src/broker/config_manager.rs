//! Crash-safe JSON config files (`config/consumerOffset.json`, `topics.json`,
//! `subscriptionGroup.json`), RocketMQ's `ConfigManager` done durably.
//!
//! Write: the new content goes to `<file>.tmp`, which is fsynced; the current file (if any) is
//! kept as `<file>.bak` (hard link, so a crash at any point leaves at least one complete copy);
//! the temp file is renamed over `<file>`; the directory is fsynced so the rename is durable.
//! Load: `<file>` if it parses, else `<file>.bak` (loudly; a corrupt `<file>` is renamed to
//! `<file>.corrupt-<ms>` so the next write does not make it the backup), else an error. A missing file is a
//! fresh start, a corrupt one with no usable backup is an error: ringmq never silently starts
//! every consumer group from offset 0.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::store::fs::{sync_dir, FileSystem, RealFs, SyncKind};
use crate::store::StoreError;

/// A table's "changed since its file was last written" flag and the wake-up of the metadata
/// persister thread (`ringmq-config-persist`, started by `startup`).
///
/// Entries created on the request path (a heartbeat's subscription group, a send's topic, a
/// retry or DLQ topic) only [`DirtyFlag::mark`] the table: the persister writes it later, off
/// the io_uring worker thread, and any number of changes during one write coalesce into one
/// more write. Admin updates write the file before they are answered
/// ([`PersistGate::persist`] from the request, as Java's `updateTopicConfig` does).
#[derive(Debug, Default)]
pub struct DirtyFlag {
    dirty: AtomicBool,
    /// A bounded(1) channel: a wake-up already pending is enough.
    wake: OnceLock<crossbeam::channel::Sender<()>>,
}

impl DirtyFlag {
    /// Records a change and wakes the persister.
    pub fn mark(&self) {
        self.dirty.store(true, Ordering::Release);
        self.wake();
    }

    /// Wakes the persister without a change (to let it see a stop).
    pub fn wake(&self) {
        if let Some(tx) = self.wake.get() {
            // Full: a wake-up is pending already. Disconnected: the persister has stopped,
            // and the shutdown writes every table.
            let _ = tx.try_send(());
        }
    }

    pub fn is_set(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Connects the persister's channel (once; later calls keep the first).
    pub fn connect(&self, tx: crossbeam::channel::Sender<()>) {
        let _ = self.wake.set(tx);
    }
}

/// Serializes the writes of one file and keeps its [`DirtyFlag`] right: a write clears the
/// flag before it takes its snapshot of the table, so a change made during the write marks the
/// table again, and a failed write marks it again too. Writes run one at a time and each
/// snapshots after the previous one finished, so an older snapshot never lands after a newer.
///
/// Changes are numbered ([`PersistGate::mark`]); a request that must not be answered before
/// its change is on disk waits for the write covering its number
/// ([`PersistGate::wait_written`]) without blocking its thread.
#[derive(Debug)]
pub struct PersistGate {
    pub dirty: DirtyFlag,
    write_lock: Mutex<()>,
    /// Number of the last change.
    marked: AtomicU64,
    /// Number of the last change a finished write covers.
    written: tokio::sync::watch::Sender<u64>,
}

impl Default for PersistGate {
    fn default() -> Self {
        PersistGate {
            dirty: DirtyFlag::default(),
            write_lock: Mutex::new(()),
            marked: AtomicU64::new(0),
            written: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// How long a request waits for the persister to write the change it made
/// ([`PersistGate::wait_written`]) before it is answered anyway (with a warning: Java logs a
/// failed metadata write and answers the request too).
pub const PERSIST_WAIT_TIMEOUT_MS: u64 = 5_000;

impl PersistGate {
    /// Records a change for the persister; returns its number.
    pub fn mark(&self) -> u64 {
        let generation = self.marked.fetch_add(1, Ordering::AcqRel) + 1;
        self.dirty.mark();
        generation
    }

    /// Number of the last change.
    pub fn last_marked(&self) -> u64 {
        self.marked.load(Ordering::Acquire)
    }

    /// Writes now: `snapshot_and_write` takes the table's snapshot and writes it.
    pub fn persist(
        &self,
        snapshot_and_write: impl FnOnce() -> Result<(), PersistError>,
    ) -> Result<(), PersistError> {
        let _guard: MutexGuard<'_, ()> = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let generation = self.marked.load(Ordering::Acquire);
        self.dirty.dirty.store(false, Ordering::Release);
        snapshot_and_write().inspect_err(|_| self.dirty.dirty.store(true, Ordering::Release))?;
        self.written.send_if_modified(|w| {
            let newer = generation > *w;
            *w = (*w).max(generation);
            newer
        });
        Ok(())
    }

    /// Writes when the table changed since the last write; says whether it wrote.
    pub fn persist_if_dirty(
        &self,
        snapshot_and_write: impl FnOnce() -> Result<(), PersistError>,
    ) -> Result<bool, PersistError> {
        if !self.dirty.is_set() {
            return Ok(false);
        }
        self.persist(snapshot_and_write).map(|()| true)
    }

    /// Resolves once change `generation` is written. Without a persister thread (a controller
    /// driven by tests) it writes at once instead. After [`PERSIST_WAIT_TIMEOUT_MS`] it gives
    /// up with a warning.
    pub async fn wait_written(
        &self,
        generation: u64,
        snapshot_and_write: impl FnOnce() -> Result<(), PersistError>,
    ) -> Result<(), PersistError> {
        if self.dirty.wake.get().is_none() {
            if *self.written.borrow() < generation {
                self.persist(snapshot_and_write)?;
            }
            return Ok(());
        }
        let mut rx = self.written.subscribe();
        let timeout = std::time::Duration::from_millis(PERSIST_WAIT_TIMEOUT_MS);
        let written = tokio::time::timeout(timeout, rx.wait_for(|w| *w >= generation)).await;
        if !matches!(written, Ok(Ok(_))) {
            tracing::warn!(
                generation,
                "the metadata persister did not write a change in time; answering anyway"
            );
        }
        Ok(())
    }
}

/// Why a config file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is corrupt ({reason}) and its backup {backup} is missing or corrupt too")]
    Corrupt {
        path: PathBuf,
        backup: PathBuf,
        /// Boxed: a cold case that would otherwise triple the size of every result.
        reason: Box<CorruptReason>,
    },
}

impl PersistError {
    /// This error's text with the files it names reduced to their names, for a remote client
    /// (see `StoreError::text_without_paths`). The wording is the `Display` one.
    pub fn text_without_paths(&self) -> String {
        let name = |path: &Path| {
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        };
        match self {
            PersistError::Io { op, path, source } => format!("{op} {}: {source}", name(path)),
            PersistError::Corrupt {
                path,
                backup,
                reason,
            } => format!(
                "{} is corrupt ({reason}) and its backup {} is missing or corrupt too",
                name(path),
                name(backup)
            ),
        }
    }
}

/// Why the text of a config file is not the table it should hold.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("no offsetTable object")]
    NoOffsetTable,
    #[error("key `{key}` lacks @")]
    KeyWithoutAt { key: String },
    #[error("`{key}` is not an object")]
    NotAnObject { key: String },
    #[error("`{key}` has a bad queue id `{queue}`")]
    BadQueueId { key: String, queue: String },
    #[error("`{key}` queue {queue} offset not integer")]
    OffsetNotInteger { key: String, queue: String },
}

/// What is wrong with a config file that was read in place of its backup, or with both.
#[derive(Debug, thiserror::Error)]
pub enum FileProblem {
    #[error("missing")]
    Missing,
    #[error(transparent)]
    Content(#[from] ContentError),
}

/// A config file was missing or corrupt and its backup was loaded instead: the caller says so
/// loudly.
#[derive(Debug, thiserror::Error)]
pub struct BackupUsed {
    pub path: PathBuf,
    pub backup: PathBuf,
    pub problem: FileProblem,
    /// Where the corrupt main file was moved (see [`load_with_backup`]); None when it was
    /// missing.
    pub moved_to: Option<PathBuf>,
}

impl std::fmt::Display for BackupUsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} unusable ({}); loaded its backup {}",
            self.path.display(),
            self.problem,
            self.backup.display()
        )?;
        match &self.moved_to {
            Some(to) => write!(f, "; the corrupt file is kept as {}", to.display()),
            None => Ok(()),
        }
    }
}

/// Why neither a config file nor its backup could be loaded.
#[derive(Debug)]
pub struct CorruptReason {
    pub main: FileProblem,
    /// None: the backup is missing.
    pub backup: Option<ContentError>,
}

impl std::fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backup {
            Some(backup) => write!(f, "main: {}; backup: {backup}", self.main),
            None => write!(f, "{}", self.main),
        }
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PersistError + 'a {
    move |source| PersistError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The backup file RocketMQ keeps next to a config file.
pub fn backup_path(path: &Path) -> PathBuf {
    sibling(path, ".bak")
}

/// The file system the metadata files are created, written, fsynced and renamed through: the
/// store's seam ([`crate::store::fs::FileSystem`]), so tests inject failures here as in the
/// store. The real file system until [`MetadataFs::set`].
#[derive(Debug, Default)]
pub struct MetadataFs(OnceLock<Arc<dyn FileSystem>>);

impl MetadataFs {
    /// Uses `fs` from now on (once; later calls keep the first).
    pub fn set(&self, fs: Arc<dyn FileSystem>) {
        let _ = self.0.set(fs);
    }

    pub fn get(&self) -> &dyn FileSystem {
        match self.0.get() {
            Some(fs) => fs.as_ref(),
            None => &RealFs,
        }
    }
}

/// A store file-system error as a metadata one (the same operation, path and OS error).
fn from_store(e: StoreError) -> PersistError {
    match e {
        StoreError::Io { op, path, source } => PersistError::Io { op, path, source },
        other => PersistError::Io {
            op: "file system",
            path: PathBuf::new(),
            source: io::Error::other(other.to_string()),
        },
    }
}

/// Writes `content` to `path` crash-safely (see the module doc) on the real file system.
pub fn write_atomically(path: &Path, content: &[u8]) -> Result<(), PersistError> {
    write_atomically_on(&RealFs, path, content)
}

/// [`write_atomically`] through `fs`. Every config-file fsync goes through `fs.sync`; a
/// failure is returned, never retried as success.
pub fn write_atomically_on(
    fs: &dyn FileSystem,
    path: &Path,
    content: &[u8],
) -> Result<(), PersistError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("create dir", dir))?;
    let tmp = sibling(path, ".tmp");
    {
        let file = fs.create(&tmp).map_err(from_store)?;
        fs.write_at(&file, &tmp, content, 0).map_err(from_store)?;
        fs.sync(&file, &tmp, SyncKind::All).map_err(from_store)?;
    }
    if path.exists() {
        let bak = backup_path(path);
        // Replace the old backup by the current file through a link, so that at every instant
        // either <file> or <file>.bak is a complete previous version.
        let bak_tmp = sibling(path, ".bak.tmp");
        let _ = std::fs::remove_file(&bak_tmp); // leftover of an earlier crash; absence is fine
        std::fs::hard_link(path, &bak_tmp).map_err(io_err("link backup", &bak_tmp))?;
        fs.rename(&bak_tmp, &bak).map_err(from_store)?;
    }
    fs.rename(&tmp, path).map_err(from_store)?;
    sync_dir(fs, dir).map_err(from_store)
}

/// What [`load_with_backup`] found.
#[derive(Debug)]
pub enum Loaded<T> {
    /// Neither the file nor its backup exists: a fresh start.
    Missing,
    /// The main file parsed.
    Main(T),
    /// The main file was missing or corrupt; the backup parsed.
    Backup(T, BackupUsed),
}

/// Loads `path` with `parse`, falling back to `<path>.bak`.
pub fn load_with_backup<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, ContentError>,
) -> Result<Loaded<T>, PersistError> {
    let bak = backup_path(path);
    let main = match read_optional(path)? {
        Some(text) => match parse(&text) {
            Ok(v) => return Ok(Loaded::Main(v)),
            Err(e) => FileProblem::Content(e),
        },
        None => FileProblem::Missing,
    };
    let backup = match read_optional(&bak)? {
        Some(text) => match parse(&text) {
            Ok(v) => {
                let moved_to = match main {
                    FileProblem::Content(_) => Some(move_aside(path)?),
                    FileProblem::Missing => None,
                };
                let used = BackupUsed {
                    path: path.to_path_buf(),
                    backup: bak,
                    problem: main,
                    moved_to,
                };
                return Ok(Loaded::Backup(v, used));
            }
            Err(e) => Some(e),
        },
        None if matches!(main, FileProblem::Missing) => return Ok(Loaded::Missing),
        None => None,
    };
    Err(PersistError::Corrupt {
        path: path.to_path_buf(),
        backup: bak,
        reason: Box::new(CorruptReason { main, backup }),
    })
}

/// Renames a corrupt config file to `<file>.corrupt-<ms since epoch>`, durably. Left in place,
/// the next [`write_atomically`] would hard-link it over the good `.bak` the load just used,
/// and a torn write after that would leave no usable copy. Renamed rather than removed, so the
/// bytes stay for a look.
fn move_aside(path: &Path) -> Result<PathBuf, PersistError> {
    let to = sibling(path, &format!(".corrupt-{}", crate::common::now_ms()));
    std::fs::rename(path, &to).map_err(io_err("rename corrupt file", path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    sync_dir(&RealFs, dir).map_err(from_store)?;
    Ok(to)
}

/// The `offsetTable` object of an offset file (`consumerOffset.json`, `delayOffset.json`).
pub fn parse_offset_table(
    text: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, ContentError> {
    let mut value: serde_json::Value = parse_json(text)?;
    match value.get_mut("offsetTable").map(serde_json::Value::take) {
        Some(serde_json::Value::Object(table)) => Ok(table),
        _ => Err(ContentError::NoOffsetTable),
    }
}

/// One `"queue": offset` entry of table `key` of an offset file.
pub fn queue_offset(
    key: &str,
    queue: &str,
    offset: &serde_json::Value,
) -> Result<(i32, i64), ContentError> {
    let queue_id = queue.parse().map_err(|_| ContentError::BadQueueId {
        key: key.to_string(),
        queue: queue.to_string(),
    })?;
    // As fastjson reads a long: a number, an integral decimal or a numeric string.
    let offset =
        <crate::remoting::body::json::Lenient<i64> as serde::Deserialize>::deserialize(offset)
            .map_err(|_| ContentError::OffsetNotInteger {
                key: key.to_string(),
                queue: queue.to_string(),
            })?
            .0;
    Ok((queue_id, offset))
}

/// Parses a config file's JSON (after [`quote_bare_integer_keys`]) into `T`.
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ContentError> {
    Ok(serde_json::from_str(&quote_bare_integer_keys(text))?)
}

fn read_optional(path: &Path) -> Result<Option<String>, PersistError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PersistError::Io {
            op: "read",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Java's fastjson writes integer map keys unquoted (`{0:120,1:98}`), which is not JSON.
/// This rewrites such keys to quoted ones outside of strings so serde_json can read files the
/// Java broker wrote. Valid JSON passes through unchanged. (One implementation, shared with the
/// name server's lenient body parsing.)
pub fn quote_bare_integer_keys(text: &str) -> String {
    match crate::remoting::body::json::quote_bare_integer_keys(text.as_bytes()) {
        std::borrow::Cow::Borrowed(_) => text.to_string(),
        // Only ASCII quotes are inserted between whole UTF-8 sequences.
        std::borrow::Cow::Owned(bytes) => String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn parse_value(text: &str) -> Result<serde_json::Value, ContentError> {
        parse_json(text)
    }

    #[test]
    fn quotes_java_style_integer_keys_only_outside_strings() {
        let java = r#"{"offsetTable":{"T@g":{0:120,1:98, -1 : 5},"x":"{0:1}"}}"#;
        let v = parse_value(java).unwrap();
        assert_eq!(v["offsetTable"]["T@g"]["0"], 120);
        assert_eq!(v["offsetTable"]["T@g"]["1"], 98);
        assert_eq!(v["offsetTable"]["T@g"]["-1"], 5);
        assert_eq!(v["offsetTable"]["x"], "{0:1}");
        let standard = r#"{"a":[1,2,{"3":4}],"s":"é\"0:"}"#;
        assert_eq!(quote_bare_integer_keys(standard), standard);
    }

    #[test]
    fn write_keeps_backup_and_load_falls_back_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("consumerOffset.json");
        write_atomically(&path, b"{\"v\":1}").unwrap();
        write_atomically(&path, b"{\"v\":2}").unwrap();
        assert_eq!(fs::read_to_string(backup_path(&path)).unwrap(), "{\"v\":1}");
        let loaded = load_with_backup(&path, parse_value).unwrap();
        assert!(
            matches!(&loaded, Loaded::Main(v) if *v == serde_json::json!({"v":2})),
            "{loaded:?}"
        );
        fs::write(&path, b"{\"v\":").unwrap(); // torn main file
        match load_with_backup(&path, parse_value).unwrap() {
            Loaded::Backup(v, used) => {
                assert_eq!(v, serde_json::json!({"v":1}));
                assert!(matches!(used.problem, FileProblem::Content(_)), "{used}");
            }
            other => panic!("expected backup, got {other:?}"),
        }
        fs::write(backup_path(&path), b"garbage").unwrap();
        assert!(matches!(
            load_with_backup(&path, parse_value),
            Err(PersistError::Corrupt { .. })
        ));
    }

    #[test]
    fn missing_files_are_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.json");
        let loaded = load_with_backup(&path, parse_value).unwrap();
        assert!(matches!(loaded, Loaded::Missing), "{loaded:?}");
    }
}
