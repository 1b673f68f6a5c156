//! The request signature of ACL 1.0 (Java `AclUtils.combineRequestContent`, `AclSigner`,
//! `AclClientRPCHook`): HmacSHA1 with the account's secret key over the values of every ext field
//! but `Signature`, in the order of their sorted keys, followed by the body; base64 (standard
//! alphabet, padded).

use base64::Engine as _;
use hmac::{KeyInit, Mac};

use crate::remoting::command::RemotingCommand;

/// Ext field naming the account (`SessionCredentials.ACCESS_KEY`).
pub const ACCESS_KEY: &str = "AccessKey";
/// Ext field carrying the signature (`SessionCredentials.SIGNATURE`).
pub const SIGNATURE: &str = "Signature";
/// Optional ext field of temporary credentials (`SessionCredentials.SECURITY_TOKEN`). Java
/// signs it like any other field and checks nothing else about it; so does ringmq.
pub const SECURITY_TOKEN: &str = "SecurityToken";

/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: left out of the content for clients of version
/// [`UNIQUE_KEY_QUERY_SIGNED_SINCE_VERSION`] - 1 and older, whose hook added it after signing.
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// `MQVersion.Version.V4_9_3.ordinal() + 1`: the first client version that signs
/// `_UNIQUE_KEY_QUERY`.
const UNIQUE_KEY_QUERY_SIGNED_SINCE_VERSION: i32 = 400;

type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// The signed bytes of `request` as the broker computes them (`PlainAccessResource.parse` +
/// `AclUtils.combineRequestContent`). Keys sort as Java's `TreeMap<String, _>` does: by UTF-16
/// code units.
pub fn request_content(request: &RemotingCommand) -> Vec<u8> {
    let skip_unique_key = request.version < UNIQUE_KEY_QUERY_SIGNED_SINCE_VERSION;
    let mut fields: Vec<(&str, &str)> = request
        .ext_fields
        .iter()
        .filter(|(key, _)| *key != SIGNATURE)
        .filter(|(key, _)| !(skip_unique_key && *key == UNIQUE_MSG_QUERY_FLAG))
        .collect();
    fields.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    let values_len: usize = fields.iter().map(|(_, value)| value.len()).sum();
    let mut content = Vec::with_capacity(values_len + request.body.len());
    for (_, value) in fields {
        content.extend_from_slice(value.as_bytes());
    }
    content.extend_from_slice(&request.body);
    content
}

/// `AclSigner.calSignature`: base64 of HmacSHA1(`secret_key`, `content`).
pub fn cal_signature(content: &[u8], secret_key: &str) -> String {
    // HMAC takes a key of any length (longer keys are hashed first): this cannot fail.
    let mut mac = HmacSha1::new_from_slice(secret_key.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(content);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// What Java's `AclClientRPCHook.doBeforeRequest` does to a request: adds `AccessKey` (and
/// `SecurityToken` when given) and the `Signature` over the result. For tests and tools that
/// talk to an ACL broker.
pub fn sign_request(
    request: &mut RemotingCommand,
    access_key: &str,
    secret_key: &str,
    security_token: Option<&str>,
) {
    request.set_ext(ACCESS_KEY, access_key);
    if let Some(token) = security_token {
        request.set_ext(SECURITY_TOKEN, token);
    }
    let signature = cal_signature(&request_content(request), secret_key);
    request.set_ext(SIGNATURE, signature);
}

/// Constant-time comparison of two signatures, so a forger learns nothing from timing.
pub fn signatures_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// A SEND_MESSAGE_V2 as a Java producer with `AclClientRPCHook(RocketMQ, 12345678)` signs it.
    fn java_shaped_send() -> RemotingCommand {
        RemotingCommand::request(310)
            .with_ext("a", "producerGroupA")
            .with_ext("b", "topicA")
            .with_ext("e", "3")
            .with_ext(ACCESS_KEY, "RocketMQ")
            .with_body(Bytes::from_static(b"hello"))
    }

    #[test]
    fn content_is_sorted_values_then_body() {
        let mut request = java_shaped_send();
        request.set_ext(SIGNATURE, "ignored");
        // AccessKey < a < b < e (uppercase sorts first); Signature is left out.
        assert_eq!(
            request_content(&request),
            b"RocketMQproducerGroupAtopicA3hello"
        );
    }

    #[test]
    fn golden_signature_matches_an_independent_hmac_sha1() {
        // Computed outside Rust: printf '%s' RocketMQproducerGroupAtopicA3hello |
        //   openssl dgst -sha1 -hmac 12345678 -binary | base64
        let content = request_content(&java_shaped_send());
        assert_eq!(
            cal_signature(&content, "12345678"),
            "7KTQoYm+W1ZVFhvelhHMeHtFufc="
        );
        let no_body = java_shaped_send().with_body(Bytes::new());
        assert_eq!(
            cal_signature(&request_content(&no_body), "12345678"),
            "54xlgqnRn4b9a6UFwNVzYHtzNkU="
        );
    }

    #[test]
    fn the_rust_client_hook_vector_verifies() {
        // rocketmq-client-rust 1.0's own test of its AclClientRPCHook: ext a=first, z=last,
        // AccessKey=ak, SecurityToken=token, body "body", secret "secret".
        let mut request = RemotingCommand::request(10)
            .with_ext("z", "last")
            .with_ext("a", "first")
            .with_body(Bytes::from_static(b"body"));
        sign_request(&mut request, "ak", "secret", Some("token"));
        assert_eq!(
            request.ext_fields[SIGNATURE],
            "wuJkFDNRMKY6aFXTDwT/vg0UC8M="
        );
    }

    #[test]
    fn old_clients_do_not_sign_the_unique_key_flag() {
        let mut request = java_shaped_send().with_ext(UNIQUE_MSG_QUERY_FLAG, "true");
        request.version = 399; // V4_9_3
        assert_eq!(
            request_content(&request),
            b"RocketMQproducerGroupAtopicA3hello"
        );
        request.version = 400;
        assert_eq!(
            request_content(&request),
            b"RocketMQtrueproducerGroupAtopicA3hello",
            "_UNIQUE_KEY_QUERY sorts between AccessKey and a"
        );
    }

    #[test]
    fn keys_sort_by_utf16_like_java() {
        // U+FF21 (one UTF-16 unit, 0xFF21) sorts after U+1F600 (surrogates 0xD83D...) in Java;
        // byte order of UTF-8 would put U+FF21 first.
        let request = RemotingCommand::request(10)
            .with_ext("\u{FF21}", "2")
            .with_ext("\u{1F600}", "1");
        assert_eq!(request_content(&request), b"12");
    }

    #[test]
    fn signature_comparison() {
        assert!(signatures_equal("abc=", "abc="));
        assert!(!signatures_equal("abc=", "abd="));
        assert!(!signatures_equal("abc", "abc="));
    }
}
