//! Permission bits of ACL 1.0 and the request codes only admins may send (Java
//! `org.apache.rocketmq.acl.common.Permission`).

use crate::remoting::codes::request_code as code;

/// `Permission.DENY`: the resource is refused, whatever else is set.
pub const DENY: u8 = 1;
/// `Permission.ANY`: a needed permission satisfied by PUB or SUB.
pub const ANY: u8 = 1 << 1;
/// `Permission.PUB`: send.
pub const PUB: u8 = 1 << 2;
/// `Permission.SUB`: pull, consume, commit offsets.
pub const SUB: u8 = 1 << 3;

/// Request codes only an admin account may send (`Permission.ADMIN_CODE` of RocketMQ 5.3,
/// the last release with ACL 1.0).
pub const ADMIN_CODES: &[i32] = &[
    code::UPDATE_AND_CREATE_TOPIC,
    code::UPDATE_BROKER_CONFIG,
    code::DELETE_TOPIC_IN_BROKER,
    code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    code::DELETE_SUBSCRIPTIONGROUP,
    UPDATE_AND_CREATE_STATIC_TOPIC,
    UPDATE_AND_CREATE_ACL_CONFIG,
    DELETE_ACL_CONFIG,
    GET_BROKER_CLUSTER_ACL_INFO,
];

/// `RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC`.
pub const UPDATE_AND_CREATE_STATIC_TOPIC: i32 = 513;
/// `RequestCode.UPDATE_AND_CREATE_ACL_CONFIG`.
pub const UPDATE_AND_CREATE_ACL_CONFIG: i32 = 50;
/// `RequestCode.DELETE_ACL_CONFIG`.
pub const DELETE_ACL_CONFIG: i32 = 51;
/// `RequestCode.GET_BROKER_CLUSTER_ACL_INFO`.
pub const GET_BROKER_CLUSTER_ACL_INFO: i32 = 52;

/// `Permission.needAdminPerm`.
pub fn needs_admin(request_code: i32) -> bool {
    ADMIN_CODES.contains(&request_code)
}

/// `Permission.checkPermission`: DENY in the owned bits refuses; a needed ANY is met by PUB or
/// SUB; otherwise some needed bit must be owned.
pub fn check_permission(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// `Permission.parsePermFromString`: `PUB`, `SUB`, `PUB|SUB` / `SUB|PUB`, `DENY`; anything else
/// (including absent) is DENY, as in Java.
pub fn parse_perm(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB" | "SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// Whether `text` is one of the spellings [`parse_perm`] knows (Java's `checkResourcePerms`
/// test); an unknown one is DENY, and the loader warns about it.
pub fn is_known_perm(text: &str) -> bool {
    matches!(text.trim(), "PUB" | "SUB" | "PUB|SUB" | "SUB|PUB" | "DENY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_strings_parse_as_java() {
        assert_eq!(parse_perm(Some("PUB")), PUB);
        assert_eq!(parse_perm(Some(" SUB ")), SUB);
        assert_eq!(parse_perm(Some("PUB|SUB")), PUB | SUB);
        assert_eq!(parse_perm(Some("SUB|PUB")), PUB | SUB);
        assert_eq!(parse_perm(Some("DENY")), DENY);
        assert_eq!(
            parse_perm(Some("ANY")),
            DENY,
            "ANY is not a spelling of the file"
        );
        assert_eq!(parse_perm(Some("pub")), DENY, "case matters in Java");
        assert_eq!(parse_perm(None), DENY);
        assert!(!is_known_perm("pub") && is_known_perm("DENY"));
    }

    #[test]
    fn check_permission_truth_table() {
        assert!(check_permission(PUB, PUB));
        assert!(check_permission(PUB, PUB | SUB));
        assert!(!check_permission(PUB, SUB));
        assert!(!check_permission(SUB, PUB));
        assert!(!check_permission(PUB, DENY));
        assert!(!check_permission(PUB, DENY | PUB), "DENY wins");
        assert!(check_permission(ANY, SUB));
        assert!(check_permission(ANY, PUB));
        assert!(!check_permission(ANY, DENY));
    }

    #[test]
    fn admin_codes_are_javas() {
        for c in [17, 25, 215, 200, 207, 513, 50, 51, 52] {
            assert!(needs_admin(c), "{c}");
        }
        for c in [10, 11, 34, 310, 320, 15, 14, 105] {
            assert!(!needs_admin(c), "{c}");
        }
    }
}
