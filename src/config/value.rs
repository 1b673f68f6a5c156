//! Parsing and printing of the value types a setting can hold.

use std::path::PathBuf;

use super::sections::{BrokerRole, FlushPolicy, StoreIoMode, TransferMode};

/// A value type a config field can hold.
pub(super) trait ConfigValue: Sized {
    fn parse_value(text: &str) -> Result<Self, String>;
    fn show(&self) -> String;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn parse_value(text: &str) -> Result<Self, String> {
                text.trim().parse::<$t>().map_err(|e| format!("not a whole number of this range ({e})"))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_value!(u16, u32, u64);

impl ConfigValue for bool {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for String {
    fn parse_value(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
    fn show(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for PathBuf {
    fn parse_value(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("a path may not be empty".into());
        }
        Ok(PathBuf::from(text))
    }
    fn show(&self) -> String {
        self.display().to_string()
    }
}

impl ConfigValue for FlushPolicy {
    fn parse_value(text: &str) -> Result<Self, String> {
        // RocketMQ's flushDiskType names are accepted too.
        match text.trim().to_ascii_lowercase().as_str() {
            "async" | "async_flush" => Ok(FlushPolicy::Async),
            "sync" | "sync_flush" => Ok(FlushPolicy::Sync),
            _ => Err("expected async or sync (or ASYNC_FLUSH / SYNC_FLUSH)".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            FlushPolicy::Async => "async".into(),
            FlushPolicy::Sync => "sync".into(),
        }
    }
}

impl ConfigValue for BrokerRole {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
            "SLAVE" => Ok(BrokerRole::Slave),
            _ => Err("expected ASYNC_MASTER, SYNC_MASTER or SLAVE".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER".into(),
            BrokerRole::SyncMaster => "SYNC_MASTER".into(),
            BrokerRole::Slave => "SLAVE".into(),
        }
    }
}

impl ConfigValue for StoreIoMode {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "uring" | "io_uring" => Ok(StoreIoMode::Uring),
            "pread" => Ok(StoreIoMode::Pread),
            _ => Err("expected uring or pread".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            StoreIoMode::Uring => "uring".into(),
            StoreIoMode::Pread => "pread".into(),
        }
    }
}

impl ConfigValue for crate::store::CorruptionPolicy {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "refuse" => Ok(crate::store::CorruptionPolicy::Refuse),
            "quarantine" => Ok(crate::store::CorruptionPolicy::Quarantine),
            _ => Err("expected refuse or quarantine".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            crate::store::CorruptionPolicy::Refuse => "refuse".into(),
            crate::store::CorruptionPolicy::Quarantine => "quarantine".into(),
        }
    }
}

impl ConfigValue for TransferMode {
    fn parse_value(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "copy" => Ok(TransferMode::Copy),
            "zerocopy" | "zero-copy" | "zero_copy" => Ok(TransferMode::ZeroCopy),
            "auto" => Ok(TransferMode::Auto),
            _ => Err("expected copy, zerocopy or auto".into()),
        }
    }
    fn show(&self) -> String {
        match self {
            TransferMode::Copy => "copy".into(),
            TransferMode::ZeroCopy => "zerocopy".into(),
            TransferMode::Auto => "auto".into(),
        }
    }
}

/// An optional bool: unset shows as the empty string.
impl ConfigValue for Option<bool> {
    fn parse_value(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        bool::parse_value(text).map(Some)
    }
    fn show(&self) -> String {
        self.map_or_else(String::new, |b| b.to_string())
    }
}
