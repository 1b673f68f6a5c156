//! The rules of one `plain_acl.yml` and the check of a request against them (Java
//! `PlainPermissionManager.validate` and `PlainPermissionChecker.check`), reloaded when the file
//! changes (Java's `AclFileWatchService`).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use super::access_resource::{needed_permissions, print_resource, retry_topic};
use super::error::{AclConfigError, AclError};
use super::permission::{check_permission, is_known_perm, needs_admin, parse_perm, PUB};
use super::plain_acl_file::{
    parse_plain_acl, PlainAccessConfig, PlainAccessData, ACL_FILE_MAX_BYTES,
};
use super::remote_address::RemoteAddressStrategy;
use super::signature::{cal_signature, request_content, signatures_equal, ACCESS_KEY, SIGNATURE};
use crate::common::topic_validator::RETRY_GROUP_TOPIC_PREFIX;
use crate::remoting::command::RemotingCommand;

/// How often the file's modification time and size are compared (Java's
/// `AclFileWatchService` looks every 5 s).
pub const ACL_FILE_WATCH_INTERVAL_MS: u64 = 5_000;

/// `AclConstants.ACCESS_KEY_MIN_LENGTH` / `SECRET_KEY_MIN_LENGTH`: keys must be longer.
const KEY_MIN_LENGTH: usize = 6;

/// `TopicValidator.RMQ_SYS_TRACE_TOPIC`, the default message trace topic.
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// One account, compiled (`PlainAccessResource.build`).
#[derive(Debug)]
struct Account {
    access_key: String,
    secret_key: String,
    white: RemoteAddressStrategy,
    admin: bool,
    default_topic_perm: u8,
    default_group_perm: u8,
    /// Topic or `%RETRY%group` → permission bits.
    resource_perms: HashMap<String, u8>,
}

/// The compiled rules of one file.
#[derive(Debug, Default)]
pub struct AclRules {
    global_white: Vec<RemoteAddressStrategy>,
    accounts: HashMap<String, Account>,
}

impl AclRules {
    /// Compiles the file's data; the error text names the account's line. Like Java, an
    /// accessKey given twice keeps its first account (with a warning).
    pub fn compile(data: &PlainAccessData) -> Result<Self, String> {
        let mut rules = AclRules::default();
        for pattern in &data.global_white_remote_addresses {
            let strategy = RemoteAddressStrategy::parse(Some(pattern))
                .map_err(|e| format!("globalWhiteRemoteAddresses: {e}"))?;
            rules.global_white.push(strategy);
        }
        for config in &data.accounts {
            let account =
                compile_account(config).map_err(|e| format!("line {}: {e}", config.line))?;
            if rules.accounts.contains_key(&account.access_key) {
                tracing::warn!(access_key = %account.access_key, line = config.line, "The accessKey is repeated in the ACL file; the first account is kept");
                continue;
            }
            rules.accounts.insert(account.access_key.clone(), account);
        }
        Ok(rules)
    }
}

fn compile_account(config: &PlainAccessConfig) -> Result<Account, String> {
    let long_enough = |key: &Option<String>| {
        key.as_deref()
            .is_some_and(|k| k.encode_utf16().count() > KEY_MIN_LENGTH)
    };
    if !long_enough(&config.access_key) || !long_enough(&config.secret_key) {
        // Java prints the secret key too; ringmq keeps it out of logs.
        return Err(format!(
            "The accessKey={} and secretKey cannot be null and length should longer than {KEY_MIN_LENGTH}",
            config.access_key.as_deref().unwrap_or("null")
        ));
    }
    let white = RemoteAddressStrategy::parse(config.white_remote_address.as_deref())
        .map_err(|e| e.to_string())?;
    let mut resource_perms = HashMap::new();
    for (entries, is_topic) in [(&config.group_perms, false), (&config.topic_perms, true)] {
        for entry in entries {
            let items: Vec<&str> = entry.split('=').filter(|s| !s.is_empty()).collect();
            let [name, perm] = items.as_slice() else {
                let kind = if is_topic { "topic" } else { "group" };
                return Err(format!(
                    "Parse resource permission failed for {kind}:{entry}"
                ));
            };
            if !is_known_perm(perm) {
                tracing::warn!(entry = %entry, "ACL permission is not PUB, SUB, PUB|SUB or DENY; read as DENY, as Java does");
            }
            let name = name.trim();
            let resource = if is_topic {
                name.to_owned()
            } else {
                retry_topic(name)
            };
            resource_perms.insert(resource, parse_perm(Some(perm)));
        }
    }
    Ok(Account {
        access_key: config.access_key.clone().unwrap_or_default(),
        secret_key: config.secret_key.clone().unwrap_or_default(),
        white,
        admin: config.admin,
        default_topic_perm: parse_perm(config.default_topic_perm.as_deref()),
        default_group_perm: parse_perm(config.default_group_perm.as_deref()),
        resource_perms,
    })
}

impl AclRules {
    /// `PlainPermissionManager.validate(PlainAccessResource.parse(request, remoteAddr))`.
    /// With `as_admin_code`, the request is checked as if its code were an admin code.
    pub fn validate(
        &self,
        request: &RemotingCommand,
        remote_ip: IpAddr,
        as_admin_code: bool,
    ) -> Result<(), AclError> {
        // Java reads the request's resources first: a malformed one is refused even from a
        // whitelisted address. A request without ext fields has none to read.
        let needed = if request.ext_fields.is_empty() {
            BTreeMap::new()
        } else {
            needed_permissions(request)?
        };
        if self.global_white.iter().any(|w| w.matches(remote_ip)) {
            return Ok(());
        }
        let access_key = request
            .ext_opt_str(ACCESS_KEY)
            .ok_or(AclError::NoAccessKey)?;
        let account = self
            .accounts
            .get(access_key)
            .ok_or_else(|| AclError::UnknownAccessKey {
                access_key: access_key.to_owned(),
            })?;
        if account.white.matches(remote_ip) {
            return Ok(());
        }
        let expected = cal_signature(&request_content(request), &account.secret_key);
        let signed = request.ext_opt_str(SIGNATURE).unwrap_or_default();
        if !signatures_equal(&expected, signed) {
            return Err(AclError::SignatureMismatch {
                access_key: access_key.to_owned(),
            });
        }
        // Message traces may always be written.
        if needed.get(RMQ_SYS_TRACE_TOPIC) == Some(&PUB) {
            return Ok(());
        }
        check_perm(account, request.code, &needed, as_admin_code)
    }
}

/// `PlainPermissionChecker.check`.
fn check_perm(
    account: &Account,
    code: i32,
    needed: &BTreeMap<String, u8>,
    as_admin_code: bool,
) -> Result<(), AclError> {
    if account.admin {
        return Ok(());
    }
    if as_admin_code || needs_admin(code) {
        return Err(AclError::NeedAdmin {
            code,
            access_key: account.access_key.clone(),
        });
    }
    for (resource, &perm) in needed {
        let is_group = resource.starts_with(RETRY_GROUP_TOPIC_PREFIX);
        match account.resource_perms.get(resource) {
            Some(&owned) if !check_permission(perm, owned) => {
                return Err(AclError::NoPermission {
                    resource: print_resource(resource),
                });
            }
            Some(_) => {}
            None => {
                let owned = if is_group {
                    account.default_group_perm
                } else {
                    account.default_topic_perm
                };
                if !check_permission(perm, owned) {
                    return Err(AclError::NoDefaultPermission {
                        resource: print_resource(resource),
                    });
                }
            }
        }
    }
    Ok(())
}

/// What a change of the file is recognised by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len_bytes: u64,
}

/// Reads and compiles the file at `path`.
fn load_file(path: &Path) -> Result<(AclRules, FileStamp), AclConfigError> {
    let read_error = |source| AclConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if meta.len() > ACL_FILE_MAX_BYTES {
        return Err(AclConfigError::TooLarge {
            path: path.to_owned(),
            size_bytes: meta.len(),
            max_bytes: ACL_FILE_MAX_BYTES,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let invalid = |message: String| AclConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    let data = parse_plain_acl(&text).map_err(|e| invalid(e.0))?;
    let rules = AclRules::compile(&data).map_err(invalid)?;
    let stamp = FileStamp {
        modified: meta.modified().ok(),
        len_bytes: meta.len(),
    };
    Ok((rules, stamp))
}

/// The ACL of a broker or name server: the rules of its `plain_acl.yml`, swapped whole when the
/// file changes, so a request is checked against one version of the file.
#[derive(Debug)]
pub struct PlainAccessValidator {
    path: PathBuf,
    rules: ArcSwap<AclRules>,
    stamp: Mutex<FileStamp>,
}

impl PlainAccessValidator {
    /// Loads `path`; a missing, unreadable or invalid file is an error that names it.
    pub fn load(path: &Path) -> Result<Arc<Self>, AclConfigError> {
        let (rules, stamp) = load_file(path)?;
        tracing::info!(path = %path.display(), accounts = rules.accounts.len(), "ACL rules loaded");
        Ok(Arc::new(PlainAccessValidator {
            path: path.to_owned(),
            rules: ArcSwap::from_pointee(rules),
            stamp: Mutex::new(stamp),
        }))
    }

    /// The file the rules come from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks a request received from `remote_ip`.
    pub fn validate(&self, request: &RemotingCommand, remote_ip: IpAddr) -> Result<(), AclError> {
        self.rules.load().validate(request, remote_ip, false)
    }

    /// Checks a request as if its code needed an admin account (the name server's guard on
    /// registrations that would replace a live broker).
    pub fn validate_admin(
        &self,
        request: &RemotingCommand,
        remote_ip: IpAddr,
    ) -> Result<(), AclError> {
        self.rules.load().validate(request, remote_ip, true)
    }

    /// Reloads the file if its modification time or size changed. A file that no longer loads
    /// leaves the rules as they were (the error says why), as Java keeps its rules when a
    /// reload fails.
    pub fn reload_if_changed(&self) -> Result<bool, AclConfigError> {
        let current = std::fs::metadata(&self.path).ok().map(|m| FileStamp {
            modified: m.modified().ok(),
            len_bytes: m.len(),
        });
        let mut stamp = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
        if current.is_none_or(|c| c == *stamp) {
            return Ok(false);
        }
        let (rules, new_stamp) = load_file(&self.path)?;
        *stamp = new_stamp;
        tracing::info!(path = %self.path.display(), accounts = rules.accounts.len(), "ACL rules reloaded");
        self.rules.store(Arc::new(rules));
        Ok(true)
    }

    /// Starts the thread that reloads the file every [`ACL_FILE_WATCH_INTERVAL_MS`]. It holds
    /// the validator weakly and ends once the validator is dropped.
    pub fn watch(self: &Arc<Self>) -> std::io::Result<JoinHandle<()>> {
        let weak: Weak<Self> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("ringmq-acl-watch".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(ACL_FILE_WATCH_INTERVAL_MS));
                let Some(validator) = weak.upgrade() else {
                    return;
                };
                if let Err(e) = validator.reload_if_changed() {
                    tracing::warn!(error = %e, "ACL file changed but does not load; the previous rules stay");
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::plain_acl_file::parse_plain_acl;
    use super::super::signature::sign_request;
    use super::*;
    use crate::remoting::codes::request_code as code;

    const RULES: &str = "\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
";

    fn rules() -> AclRules {
        AclRules::compile(&parse_plain_acl(RULES).unwrap()).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn send(topic: &str) -> RemotingCommand {
        RemotingCommand::request(code::SEND_MESSAGE_V2)
            .with_ext("a", "pg")
            .with_ext("b", topic)
    }

    fn signed(mut request: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
        sign_request(&mut request, ak, sk, None);
        request
    }

    fn check(request: &RemotingCommand, from: &str) -> Result<(), String> {
        rules()
            .validate(request, ip(from), false)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_right_key_passes_and_perms_apply() {
        let here = "127.0.0.1";
        assert_eq!(
            check(&signed(send("topicB"), "RocketMQ", "12345678"), here),
            Ok(())
        );
        assert_eq!(
            check(&signed(send("topicA"), "RocketMQ", "12345678"), here),
            Err("No permission for topic:topicA".into())
        );
        assert_eq!(
            check(&signed(send("topicC"), "RocketMQ", "12345678"), here),
            Err("No permission for topic:topicC".into()),
            "SUB only"
        );
        assert_eq!(
            check(&signed(send("other"), "RocketMQ", "12345678"), here),
            Err("No default permission for topic:other".into())
        );
        let pull = RemotingCommand::request(code::PULL_MESSAGE)
            .with_ext("topic", "topicC")
            .with_ext("consumerGroup", "groupA");
        assert_eq!(
            check(&signed(pull, "RocketMQ", "12345678"), here),
            Err("No permission for group:groupA".into())
        );
    }

    #[test]
    fn keys_and_signatures() {
        let here = "127.0.0.1";
        assert_eq!(
            check(&send("topicB"), here),
            Err("No accessKey is configured".into())
        );
        assert_eq!(
            check(&signed(send("topicB"), "RocketMQ", "wrong-secret"), here),
            Err("Check signature failed for accessKey=RocketMQ".into())
        );
        assert_eq!(
            check(&signed(send("topicB"), "nobody99", "12345678"), here),
            Err("No acl config for nobody99".into())
        );
        let mut tampered = signed(send("topicB"), "RocketMQ", "12345678");
        tampered.set_ext("b", "topicA");
        assert!(check(&tampered, here)
            .unwrap_err()
            .starts_with("Check signature failed"));
        let unsigned = send("topicB").with_ext(ACCESS_KEY, "RocketMQ");
        assert!(check(&unsigned, here)
            .unwrap_err()
            .starts_with("Check signature failed"));
    }

    #[test]
    fn whitelists_skip_the_signature() {
        assert_eq!(
            check(&send("topicA"), "10.10.103.7"),
            Ok(()),
            "global whitelist"
        );
        let by_account = send("topicA").with_ext(ACCESS_KEY, "rocketmq2");
        assert_eq!(
            check(&by_account, "192.168.1.20"),
            Ok(()),
            "account whitelist"
        );
        assert!(check(&by_account, "192.168.2.20").is_err());
    }

    #[test]
    fn admin_codes_need_an_admin() {
        let create = RemotingCommand::request(code::UPDATE_AND_CREATE_TOPIC).with_ext("topic", "X");
        assert_eq!(
            check(&signed(create.clone(), "RocketMQ", "12345678"), "127.0.0.1"),
            Err("Need admin permission for request code=17, but accessKey=RocketMQ is not".into())
        );
        assert_eq!(
            check(&signed(create, "rocketmq2", "87654321"), "127.0.0.1"),
            Ok(())
        );
        let route = signed(RemotingCommand::request(103), "RocketMQ", "12345678");
        assert!(rules().validate(&route, ip("127.0.0.1"), true).is_err());
        let admin = signed(RemotingCommand::request(103), "rocketmq2", "87654321");
        assert_eq!(rules().validate(&admin, ip("127.0.0.1"), true), Ok(()));
    }

    #[test]
    fn traces_may_always_be_sent() {
        let trace = signed(send(RMQ_SYS_TRACE_TOPIC), "RocketMQ", "12345678");
        assert_eq!(check(&trace, "127.0.0.1"), Ok(()));
    }

    #[test]
    fn short_keys_and_bad_entries_are_refused() {
        let short =
            parse_plain_acl("accounts:\n  - accessKey: abc\n    secretKey: 12345678\n").unwrap();
        let e = AclRules::compile(&short).unwrap_err();
        assert!(
            e.starts_with("line 2: The accessKey=abc and secretKey cannot be null"),
            "{e}"
        );
        assert!(!e.contains("12345678"), "no secret in messages");
        let bad = parse_plain_acl("accounts:\n  - accessKey: abcdefg\n    secretKey: 12345678\n    topicPerms: [topicA]\n").unwrap();
        assert_eq!(
            AclRules::compile(&bad).unwrap_err(),
            "line 2: Parse resource permission failed for topic:topicA"
        );
    }

    #[test]
    fn the_file_reloads_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, RULES).unwrap();
        let validator = PlainAccessValidator::load(&path).unwrap();
        let request = signed(send("topicB"), "RocketMQ", "12345678");
        assert_eq!(validator.validate(&request, ip("127.0.0.1")), Ok(()));
        assert!(!validator.reload_if_changed().unwrap(), "unchanged");
        std::fs::write(&path, RULES.replace("topicB=PUB|SUB", "topicB=SUB")).unwrap();
        assert!(validator.reload_if_changed().unwrap());
        assert!(validator.validate(&request, ip("127.0.0.1")).is_err());
        std::fs::write(&path, "accounts: [\n").unwrap();
        assert!(validator.reload_if_changed().is_err());
        assert!(
            validator.validate(&request, ip("127.0.0.1")).is_err(),
            "the previous rules stay"
        );
        let missing = dir.path().join("none.yml");
        let e = PlainAccessValidator::load(&missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("none.yml") && e.contains("RINGMQ_ACL_FILE_PATH"),
            "{e}"
        );
    }
}
