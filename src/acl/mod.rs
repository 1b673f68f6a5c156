//! Access control (RocketMQ's ACL 1.0, Java module `acl`): accounts, white-listed addresses
//! and topic/group permissions from a `plain_acl.yml`, and the `AccessKey` / `Signature` /
//! `SecurityToken` ext fields a client's `AclClientRPCHook` adds to every request.
//!
//! - [`validator::PlainAccessValidator`]: loads the file, checks a request from an address
//!   (Java `PlainPermissionManager.validate`), reloads the file when it changes.
//! - [`access_resource`]: which topic and group permissions each request code needs.
//! - [`signature`]: HmacSHA1 over the sorted ext fields and the body.
//! - [`remote_address`]: the address patterns (`192.168.0.*`, `192.168.1.{1,2}`, ranges).
//! - [`plain_acl_file`]: the YAML file.
//! - [`permission`]: DENY / ANY / PUB / SUB and the admin-only request codes.
//!
//! The room imports only the codec (`remoting`) and `common`. The broker's dispatch calls
//! [`validator::PlainAccessValidator::validate`] before any processor; the name server calls
//! [`validator::PlainAccessValidator::validate_admin`] for a registration that would replace a
//! live broker.

pub mod access_resource;
pub mod error;
pub mod permission;
pub mod plain_acl_file;
pub mod remote_address;
pub mod signature;
pub mod validator;

pub use error::{AclConfigError, AclError};
pub use validator::{PlainAccessValidator, ACL_FILE_WATCH_INTERVAL_MS};
