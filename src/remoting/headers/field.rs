//! The ext-field value types a header field can have, and the trait every header implements.

use crate::remoting::command::RemotingCommand;
use crate::remoting::error::HeaderError;

/// A type that can be read from / written to one ext field.
pub trait HeaderField: Sized {
    /// Reads the field `key` from `cmd`.
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError>;
    /// Writes the field `key` into `cmd` (nothing for an absent optional).
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str);
}

impl HeaderField for String {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_str(key).map(str::to_owned)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for i32 {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_i32(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for i64 {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_i64(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for bool {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_bool(key))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        cmd.set_ext(key, self);
    }
}

impl HeaderField for Option<String> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_opt_str(key).map(str::to_owned))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<i32> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_opt_i32(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<i64> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        cmd.ext_opt_i64(key)
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

impl HeaderField for Option<bool> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Result<Self, HeaderError> {
        Ok(cmd.ext_opt_bool(key))
    }
    fn write(&self, cmd: &mut RemotingCommand, key: &'static str) {
        if let Some(value) = self {
            cmd.set_ext(key, value);
        }
    }
}

/// Decode/encode shared by every header, for generic code.
pub trait CustomHeader: Sized {
    fn decode(cmd: &RemotingCommand) -> Result<Self, HeaderError>;
    fn encode(&self, cmd: &mut RemotingCommand);
}
