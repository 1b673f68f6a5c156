//! Reading `plain_acl.yml` (Java `PlainAccessData` / `PlainAccessConfig`, loaded by SnakeYAML):
//!
//! ```yaml
//! globalWhiteRemoteAddresses:
//!   - 10.10.103.*
//! accounts:
//!   - accessKey: RocketMQ
//!     secretKey: 12345678
//!     whiteRemoteAddress:
//!     admin: false
//!     defaultTopicPerm: DENY
//!     defaultGroupPerm: SUB
//!     topicPerms:
//!       - topicA=DENY
//!     groupPerms:
//!       - groupA=DENY
//! ```
//!
//! Scalars are read as their source text, as SnakeYAML fills a `String` property: a secret key
//! written `0123456` stays `0123456`. An unknown key is an error naming it (SnakeYAML refuses
//! such a file too); `dataVersion` (written by Java's admin tools) is accepted and ignored.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The largest `plain_acl.yml` read; a bigger file is refused at load.
pub const ACL_FILE_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One account of the file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainAccessConfig {
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub white_remote_address: Option<String>,
    pub admin: bool,
    pub default_topic_perm: Option<String>,
    pub default_group_perm: Option<String>,
    /// `topic=PERM` entries.
    pub topic_perms: Vec<String>,
    /// `group=PERM` entries.
    pub group_perms: Vec<String>,
    /// Line of the account in the file, for messages.
    pub line: usize,
}

impl std::fmt::Debug for PlainAccessConfig {
    // The secret key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainAccessConfig")
            .field("access_key", &self.access_key)
            .field("white_remote_address", &self.white_remote_address)
            .field("admin", &self.admin)
            .field("default_topic_perm", &self.default_topic_perm)
            .field("default_group_perm", &self.default_group_perm)
            .field("topic_perms", &self.topic_perms)
            .field("group_perms", &self.group_perms)
            .finish_non_exhaustive()
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlainAccessData {
    pub global_white_remote_addresses: Vec<String>,
    pub accounts: Vec<PlainAccessConfig>,
}

/// A YAML node with scalars kept as text.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Text, whether it was written plain (so `~`, `null` and blank mean null), line.
    Scalar(String, bool, usize),
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, usize),
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(_, _, line) | Node::Seq(_, line) | Node::Map(_, line) => *line,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(text, true, _) if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }
}

/// A collection being built: a sequence, or a mapping with the key waiting for its value.
enum Frame {
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize),
}

/// Builds [`Node`]s from parser events (the tree loader of yaml-rust2 turns `0123` into the
/// number 123; SnakeYAML gives a `String` property the text).
#[derive(Default)]
struct TreeBuilder {
    stack: Vec<Frame>,
    root: Option<Node>,
    alias_seen: Option<usize>,
}

impl TreeBuilder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(entries, key, _)) => match key.take() {
                Some(key) => entries.push((key, node)),
                None => *key = Some(node),
            },
            None => self.root = Some(node),
        }
    }
}

impl MarkedEventReceiver for TreeBuilder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        let line = mark.line().max(1);
        match event {
            Event::Scalar(text, style, _, _) => {
                self.push_value(Node::Scalar(text, style == TScalarStyle::Plain, line));
            }
            Event::SequenceStart(..) => self.stack.push(Frame::Seq(Vec::new(), line)),
            Event::MappingStart(..) => self.stack.push(Frame::Map(Vec::new(), None, line)),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq(items, line)) => self.push_value(Node::Seq(items, line)),
                Some(Frame::Map(entries, _, line)) => self.push_value(Node::Map(entries, line)),
                None => {}
            },
            Event::Alias(_) => {
                self.alias_seen.get_or_insert(line);
                self.push_value(Node::Scalar(String::new(), true, line));
            }
            _ => {}
        }
    }
}

/// Why a file's text is not a `plain_acl.yml`; the text names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AclFileError(pub String);

fn err(line: usize, message: impl std::fmt::Display) -> AclFileError {
    AclFileError(format!("line {line}: {message}"))
}

/// Parses the text of a `plain_acl.yml`. An empty file is an empty configuration (Java logs
/// "No data in file" and has no account).
pub fn parse_plain_acl(text: &str) -> Result<PlainAccessData, AclFileError> {
    let mut builder = TreeBuilder::default();
    Parser::new_from_str(text)
        .load(&mut builder, false)
        .map_err(|e| AclFileError(format!("not YAML: {e}")))?;
    if let Some(line) = builder.alias_seen {
        return Err(err(line, "YAML aliases are not supported in plain_acl.yml"));
    }
    let Some(root) = builder.root.filter(|r| !r.is_null()) else {
        return Ok(PlainAccessData::default());
    };
    let Node::Map(entries, _) = root else {
        return Err(err(
            root.line(),
            "the file must be a mapping (globalWhiteRemoteAddresses, accounts)",
        ));
    };
    let mut data = PlainAccessData::default();
    for (key, value) in &entries {
        match key_text(key)? {
            "globalWhiteRemoteAddresses" => {
                data.global_white_remote_addresses =
                    string_list(value, "globalWhiteRemoteAddresses")?;
            }
            "accounts" => data.accounts = accounts(value)?,
            "dataVersion" => {}
            other => return Err(err(key.line(), format!("unknown key {other:?}"))),
        }
    }
    Ok(data)
}

fn key_text(key: &Node) -> Result<&str, AclFileError> {
    match key {
        Node::Scalar(text, _, _) => Ok(text),
        other => Err(err(other.line(), "a key must be a plain word")),
    }
}

fn scalar(node: &Node, what: &str) -> Result<Option<String>, AclFileError> {
    if node.is_null() {
        return Ok(None);
    }
    match node {
        Node::Scalar(text, _, _) => Ok(Some(text.clone())),
        other => Err(err(other.line(), format!("{what} must be a single value"))),
    }
}

fn string_list(node: &Node, what: &str) -> Result<Vec<String>, AclFileError> {
    if node.is_null() {
        return Ok(Vec::new());
    }
    let Node::Seq(items, _) = node else {
        return Err(err(node.line(), format!("{what} must be a list (- item)")));
    };
    // A null item is skipped, as Java's null entries are.
    Ok(items
        .iter()
        .map(|item| scalar(item, what))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect())
}

/// SnakeYAML's (YAML 1.1) booleans.
fn boolean(node: &Node, what: &str) -> Result<bool, AclFileError> {
    let text = scalar(node, what)?;
    match text.as_deref() {
        None => Ok(false),
        Some("true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON") => Ok(true),
        Some("false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF") => Ok(false),
        Some(other) => Err(err(
            node.line(),
            format!("{what} must be true or false, not {other:?}"),
        )),
    }
}

fn accounts(node: &Node) -> Result<Vec<PlainAccessConfig>, AclFileError> {
    if node.is_null() {
        return Ok(Vec::new());
    }
    let Node::Seq(items, _) = node else {
        return Err(err(
            node.line(),
            "accounts must be a list (- accessKey: ...)",
        ));
    };
    items.iter().filter(|i| !i.is_null()).map(account).collect()
}

fn account(node: &Node) -> Result<PlainAccessConfig, AclFileError> {
    let Node::Map(entries, line) = node else {
        return Err(err(
            node.line(),
            "an account must be a mapping (accessKey: ...)",
        ));
    };
    let mut account = PlainAccessConfig {
        line: *line,
        ..PlainAccessConfig::default()
    };
    for (key, value) in entries {
        let name = key_text(key)?;
        match name {
            "accessKey" => account.access_key = scalar(value, name)?,
            "secretKey" => account.secret_key = scalar(value, name)?,
            "whiteRemoteAddress" => account.white_remote_address = scalar(value, name)?,
            "admin" => account.admin = boolean(value, name)?,
            "defaultTopicPerm" => account.default_topic_perm = scalar(value, name)?,
            "defaultGroupPerm" => account.default_group_perm = scalar(value, name)?,
            "topicPerms" => account.topic_perms = string_list(value, name)?,
            "groupPerms" => account.group_perms = string_list(value, name)?,
            other => return Err(err(key.line(), format!("unknown account key {other:?}"))),
        }
    }
    Ok(account)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RocketMQ's distribution `conf/plain_acl.yml`.
    pub(crate) const DISTRIBUTION_PLAIN_ACL: &str = "\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
";

    #[test]
    fn the_distribution_file_parses() {
        let data = parse_plain_acl(DISTRIBUTION_PLAIN_ACL).unwrap();
        assert_eq!(
            data.global_white_remote_addresses,
            ["10.10.103.*", "192.168.0.*"]
        );
        assert_eq!(data.accounts.len(), 2);
        let first = &data.accounts[0];
        assert_eq!(first.access_key.as_deref(), Some("RocketMQ"));
        assert_eq!(first.secret_key.as_deref(), Some("12345678"));
        assert_eq!(first.white_remote_address, None);
        assert!(!first.admin);
        assert_eq!(first.default_topic_perm.as_deref(), Some("DENY"));
        assert_eq!(
            first.topic_perms,
            ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]
        );
        assert_eq!(
            first.group_perms,
            ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"]
        );
        assert_eq!(first.line, 6);
        let second = &data.accounts[1];
        assert!(second.admin);
        assert_eq!(second.white_remote_address.as_deref(), Some("192.168.1.*"));
        assert!(second.topic_perms.is_empty());
    }

    #[test]
    fn scalars_keep_their_text() {
        let data = parse_plain_acl(
            "accounts:\n  - accessKey: '0x1234567'\n    secretKey: 00123456789\n    admin: yes\n",
        )
        .unwrap();
        assert_eq!(data.accounts[0].access_key.as_deref(), Some("0x1234567"));
        assert_eq!(data.accounts[0].secret_key.as_deref(), Some("00123456789"));
        assert!(data.accounts[0].admin);
    }

    #[test]
    fn empty_and_blank_files_have_no_rules() {
        assert_eq!(parse_plain_acl("").unwrap(), PlainAccessData::default());
        assert_eq!(
            parse_plain_acl("# nothing\n").unwrap(),
            PlainAccessData::default()
        );
        assert_eq!(
            parse_plain_acl("accounts:\n").unwrap(),
            PlainAccessData::default()
        );
    }

    #[test]
    fn mistakes_name_the_line() {
        let e =
            parse_plain_acl("accounts:\n  - accessKey: abcdefg\n    whiteRemoteAdress: 1.2.3.4\n")
                .unwrap_err();
        assert_eq!(e.0, "line 3: unknown account key \"whiteRemoteAdress\"");
        let e = parse_plain_acl("acounts: []\n").unwrap_err();
        assert_eq!(e.0, "line 1: unknown key \"acounts\"");
        let e = parse_plain_acl("accounts:\n  - admin: maybe\n").unwrap_err();
        assert!(
            e.0.starts_with("line 2: admin must be true or false"),
            "{e}"
        );
        assert!(parse_plain_acl("accounts: [\n")
            .unwrap_err()
            .0
            .starts_with("not YAML"));
        assert!(parse_plain_acl("- a\n- b\n").is_err());
        let e = parse_plain_acl("x: &a 1\naccounts: *a\n").unwrap_err();
        assert!(e.0.contains("aliases"), "{e}");
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let data = parse_plain_acl(DISTRIBUTION_PLAIN_ACL).unwrap();
        assert!(!format!("{data:?}").contains("12345678"));
    }
}
