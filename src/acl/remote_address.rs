//! Remote address patterns of `plain_acl.yml` (`globalWhiteRemoteAddresses` and an account's
//! `whiteRemoteAddress`), parsed and matched as Java's `RemoteAddressStrategyFactory` does:
//!
//! - blank: matches nothing;
//! - `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`: matches everything;
//! - `192.168.1.{1,2,3}` or `a,b,c` (whole addresses, no blanks): one of these addresses;
//! - a `*` or `a-b` in some part (`192.168.0.*`, `192.168.0.1-50`, `10.*.*.*`): the first such
//!   part (of the second to fourth) is a range, the parts before it must be equal, and, as in
//!   Java, the parts after it are not looked at (`192.168.*.1-50` matches all of 192.168.*.*);
//! - one IPv4 or IPv6 address.
//!
//! IPv6 addresses compare in Java's expanded form (8 groups of 4 upper-case hex digits).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A pattern, ready to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteAddressStrategy {
    /// Blank: nothing matches (`BlankRemoteAddressStrategy`).
    Blank,
    /// Everything matches (`NullRemoteAddressStrategy`).
    Any,
    /// One of these normalized addresses (`MultipleRemoteAddressStrategy`).
    Multiple(HashSet<String>),
    /// This normalized address (`OneRemoteAddressStrategy`).
    One(String),
    /// `head` then, in part `index`, a number in `start..=end` (`RangeRemoteAddressStrategy`).
    Range {
        head: String,
        index: usize,
        start: u32,
        end: u32,
        ipv6: bool,
    },
}

/// A pattern Java would refuse to load; the text is Java's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AddressPatternError(pub String);

fn examine_error(pattern: &str) -> AddressPatternError {
    AddressPatternError(format!(
        "NetAddress examine Exception netAddress is {pattern}"
    ))
}

fn scope_error(pattern: &str) -> AddressPatternError {
    AddressPatternError(format!(
        "NetAddress examine scope Exception netAddress is {pattern}"
    ))
}

/// `StringUtils.split(text, sep)`: the non-empty pieces.
fn split(text: &str, sep: char) -> Vec<&str> {
    text.split(sep).filter(|s| !s.is_empty()).collect()
}

/// Java's normalized text of a valid address: IPv4 as is, IPv6 expanded; `None` if invalid.
fn normalize(text: &str) -> Option<String> {
    if let Ok(v4) = text.parse::<Ipv4Addr>() {
        return Some(v4.to_string());
    }
    text.parse::<Ipv6Addr>().ok().map(expand_v6)
}

fn expand_v6(ip: Ipv6Addr) -> String {
    let groups: Vec<String> = ip.segments().iter().map(|g| format!("{g:04X}")).collect();
    groups.join(":")
}

/// `AclUtils.expandIP(netAddress, part)` for a pattern prefix: upper case, `::` widened to
/// `part` groups, each group left-padded to 4 digits.
fn expand_prefix(text: &str, part: usize) -> String {
    let mut text = text.to_ascii_uppercase();
    let separators = text.matches(':').count();
    if part > separators {
        let pad = ":".repeat(part - separators + 1);
        text = text.replace("::", &pad);
    }
    let groups: Vec<String> = text.split(':').map(|g| format!("{g:0>4}")).collect();
    groups.join(":")
}

impl RemoteAddressStrategy {
    /// Parses one pattern (`RemoteAddressStrategyFactory.getRemoteAddressStrategy`).
    pub fn parse(pattern: Option<&str>) -> Result<Self, AddressPatternError> {
        let Some(text) = pattern.filter(|t| !t.trim().is_empty()) else {
            return Ok(Self::Blank);
        };
        if matches!(text, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(Self::Any);
        }
        if text.ends_with('}') {
            return Self::multiple(&braced_addresses(text)?, text);
        }
        if text.contains(',') {
            return Self::multiple(&split(text, ','), text);
        }
        if text.contains('*') || text.contains('-') {
            return if text.contains(':') {
                parse_range_v6(text)
            } else {
                parse_range_v4(text)
            };
        }
        normalize(text)
            .map(Self::One)
            .ok_or_else(|| examine_error(text))
    }

    fn multiple(addresses: &[impl AsRef<str>], pattern: &str) -> Result<Self, AddressPatternError> {
        let mut set = HashSet::new();
        for address in addresses {
            let address = address.as_ref();
            set.insert(normalize(address).ok_or_else(|| examine_error(address))?);
        }
        if set.is_empty() {
            return Err(examine_error(pattern));
        }
        Ok(Self::Multiple(set))
    }

    /// Whether a request from `ip` matches.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match self {
            Self::Blank => false,
            Self::Any => true,
            Self::Multiple(set) => set.contains(&normalized_ip(ip)),
            Self::One(address) => *address == normalized_ip(ip),
            Self::Range {
                head,
                index,
                start,
                end,
                ipv6,
            } => {
                let value = match ip {
                    IpAddr::V4(v4) if !ipv6 => {
                        let text = v4.to_string();
                        text.starts_with(head.as_str())
                            .then(|| u32::from(v4.octets()[*index]))
                    }
                    IpAddr::V6(v6) if *ipv6 => expand_v6(v6)
                        .starts_with(head.as_str())
                        .then(|| u32::from(v6.segments()[*index])),
                    _ => None,
                };
                value.is_some_and(|v| (*start..=*end).contains(&v))
            }
        }
    }
}

fn normalized_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => expand_v6(v6),
    }
}

/// `192.168.1.{1,2,3}` → the three addresses (`AclUtils.getAddresses`).
fn braced_addresses(text: &str) -> Result<Vec<String>, AddressPatternError> {
    let (sep, min_parts) = if text.contains(':') {
        (':', 1)
    } else {
        ('.', 4)
    };
    let parts = split(text, sep);
    let last = parts.last().copied().unwrap_or_default();
    if parts.len() < min_parts || !last.starts_with('{') {
        return Err(AddressPatternError(format!(
            "MultipleRemoteAddressStrategy netAddress examine scope Exception netAddress: {text}"
        )));
    }
    let prefix = &text[..text.find('{').unwrap_or(0)];
    let inner = &last[1..last.len().saturating_sub(1).max(1)];
    Ok(split(inner, ',')
        .into_iter()
        .map(|item| format!("{prefix}{item}"))
        .collect())
}

/// A range part: `*` or `a-b` (decimal for IPv4, hex for IPv6) within `0..=max`.
fn range_part(
    value: &str,
    radix: u32,
    max: u32,
) -> Result<Option<(u32, u32)>, AddressPatternError> {
    let value = value.trim();
    if value == "*" {
        return Ok(Some((0, max)));
    }
    if !value.contains('-') {
        return Ok(None);
    }
    let bad = || {
        AddressPatternError(format!(
            "RangeRemoteAddressStrategy netAddress examine scope Exception value {value} "
        ))
    };
    if value.starts_with('-') {
        return Err(bad());
    }
    let bounds = split(value, '-');
    let parse = |s: &str| u32::from_str_radix(s, radix).map_err(|_| bad());
    let (start, end) = match bounds.as_slice() {
        [start, end, ..] => (parse(start)?, parse(end)?),
        _ => return Err(bad()),
    };
    if start > end || end > max {
        return Err(AddressPatternError(format!(
            "RangeRemoteAddressStrategy netAddress examine scope Exception start is {start} , end is {end}"
        )));
    }
    // Java takes a range ending at 0 for "no range here" and looks further.
    Ok((end > 0).then_some((start, end)))
}

fn parse_range_v4(text: &str) -> Result<RemoteAddressStrategy, AddressPatternError> {
    let parts = split(text, '.');
    for index in 1..=3 {
        let part = parts.get(index).ok_or_else(|| scope_error(text))?;
        let Some((start, end)) = range_part(part, 10, 255)? else {
            continue;
        };
        // `AclUtils.verify(remoteAddr, index - 1)`: four parts, the first index - 1 numbers.
        let numeric = |p: &&str| p.trim().parse::<u32>().is_ok_and(|n| n <= 255);
        if parts.len() != 4 || !parts[..index - 1].iter().all(numeric) {
            return Err(scope_error(text));
        }
        let head: String = parts[..index]
            .iter()
            .map(|p| format!("{}.", p.trim()))
            .collect();
        return Ok(RemoteAddressStrategy::Range {
            head,
            index,
            start,
            end,
            ipv6: false,
        });
    }
    // Java loads such a pattern and then fails every request it is asked to match.
    Err(scope_error(text))
}

fn parse_range_v6(text: &str) -> Result<RemoteAddressStrategy, AddressPatternError> {
    // `AclUtils.IPv6AddressCheck`: `*` only last, `-` only in the last group (or the one before
    // a final `*`).
    let asterisk = text.find('*');
    if asterisk.is_some_and(|a| a != text.len() - 1) {
        return Err(scope_error(text));
    }
    if let Some(minus) = text.find('-') {
        let last_colon = text.rfind(':').unwrap_or(0);
        let limit = if asterisk.is_none() {
            last_colon
        } else {
            text[..last_colon].rfind(':').unwrap_or(0)
        };
        if minus <= limit {
            return Err(scope_error(text));
        }
    }
    let parts = split(text, ':');
    for part in parts.iter().skip(1) {
        let Some((start, end)) = range_part(part, 16, 0xFFFF)? else {
            continue;
        };
        let prefix_end = match (asterisk.is_some(), text.contains('-')) {
            (true, true) => {
                let last = text.rfind(':').unwrap_or(0);
                (text[..last].rfind(':').unwrap_or(0), 6)
            }
            _ => (text.rfind(':').unwrap_or(0), 7),
        };
        let head = expand_prefix(&text[..prefix_end.0], prefix_end.1);
        let index = split(&head, ':').len();
        if index >= 8 || !head.split(':').all(|g| u32::from_str_radix(g, 16).is_ok()) {
            return Err(scope_error(text));
        }
        return Ok(RemoteAddressStrategy::Range {
            head,
            index,
            start,
            end,
            ipv6: true,
        });
    }
    Err(scope_error(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(pattern: &str) -> RemoteAddressStrategy {
        RemoteAddressStrategy::parse(Some(pattern)).unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    fn matches(pattern: &str, ip: &str) -> bool {
        strategy(pattern).matches(ip.parse().unwrap())
    }

    #[test]
    fn blank_and_any() {
        assert_eq!(
            RemoteAddressStrategy::parse(None).unwrap(),
            RemoteAddressStrategy::Blank
        );
        assert!(!matches("  ", "127.0.0.1"));
        for any in ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"] {
            assert!(matches(any, "10.1.2.3") && matches(any, "::1"), "{any}");
        }
    }

    #[test]
    fn last_part_wildcard() {
        assert!(matches("192.168.0.*", "192.168.0.1"));
        assert!(matches("192.168.0.*", "192.168.0.255"));
        assert!(!matches("192.168.0.*", "192.168.1.1"));
        assert!(
            !matches("192.168.1.*", "192.168.10.1"),
            "whole parts, not a text prefix"
        );
        assert!(matches("10.*.*.*", "10.200.3.4"));
        assert!(!matches("10.*.*.*", "11.0.0.1"));
    }

    #[test]
    fn numeric_ranges() {
        assert!(matches("192.168.0.1-50", "192.168.0.50"));
        assert!(!matches("192.168.0.1-50", "192.168.0.51"));
        assert!(!matches("192.168.0.1-50", "192.168.0.0"));
        // Java looks at the first range part only: the rest of the pattern is ignored.
        assert!(matches("192.168.*.1-50", "192.168.7.1"));
        assert!(matches("192.168.*.1-50", "192.168.7.200"));
        assert!(!matches("192.168.*.1-50", "192.169.7.1"));
    }

    #[test]
    fn lists_of_addresses() {
        assert!(matches("192.168.1.{1,2,3}", "192.168.1.2"));
        assert!(!matches("192.168.1.{1,2,3}", "192.168.1.4"));
        assert!(matches("192.168.1.1,192.168.1.2", "192.168.1.2"));
        // Java splits `192.168.1.1,2,3` into three addresses and refuses "2".
        assert_eq!(
            RemoteAddressStrategy::parse(Some("192.168.1.1,2,3"))
                .unwrap_err()
                .0,
            "NetAddress examine Exception netAddress is 2"
        );
        assert!(matches("::1,10.0.0.1", "0:0:0:0:0:0:0:1"));
    }

    #[test]
    fn single_addresses() {
        assert!(matches("127.0.0.1", "127.0.0.1"));
        assert!(!matches("127.0.0.1", "127.0.0.2"));
        assert!(matches("::1", "::1"));
        assert!(
            matches("127.0.0.1", "::ffff:127.0.0.1"),
            "IPv4-mapped is IPv4, as in Java"
        );
        assert!(RemoteAddressStrategy::parse(Some("300.1.1.1")).is_err());
        assert!(RemoteAddressStrategy::parse(Some("localhost")).is_err());
    }

    #[test]
    fn bad_ranges_are_refused() {
        for bad in [
            "192.168.0.-5",
            "192.168.0.9-1",
            "192.168.0.1-300",
            "192.*",
            "1.2.3.0-0",
        ] {
            assert!(RemoteAddressStrategy::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv6_ranges() {
        assert!(matches("1:2:3:*", "1:2:3:ffff::"));
        assert!(!matches("1:2:3:*", "1:2:4::"));
        assert!(matches("2::ac5:78:1-200", "2::ac5:78:1ff"));
        assert!(!matches("2::ac5:78:1-200", "2::ac5:78:201"));
        assert!(!matches("1:2:3:*", "1.2.3.4"));
    }
}
