//! The rooms of `src/` and which may import which. Each of them could become a crate: the
//! store, the codec, the network runtime, the filter engine and the name server never import the
//! broker, and the lower rooms never import the upper ones. The test reads every `crate::…` and
//! `super::…` path in the sources, resolves it to the room it lands in, and fails naming the file
//! and line of any import the table below does not allow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Room → the other rooms it may import. A room not listed here fails the test, so a new room
/// must state its place.
const ALLOWED_IMPORTS: &[(&str, &[&str])] = &[
    ("common", &[]),
    ("remoting", &["common"]),
    ("metrics", &["common"]),
    ("store", &["common", "metrics"]),
    ("filter", &["common", "remoting", "store"]),
    ("config", &["common", "store"]),
    ("net", &["common", "config", "remoting"]),
    ("acl", &["common", "remoting"]),
    ("namesrv", &["acl", "common", "config", "net", "remoting"]),
    (
        "broker",
        &[
            "acl", "common", "config", "filter", "metrics", "namesrv", "net", "remoting", "store",
        ],
    ),
];

/// `src/lib.rs` and `src/main.rs` are the roots, not rooms.
const ROOTS: &[&str] = &["lib.rs", "main.rs"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file, e.g. `src/store/io/mod.rs` → `["store", "io"]`.
fn module_path(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src_dir()).unwrap();
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The room (first segment under `crate`) that each path in `line` lands in.
fn imported_rooms(line: &str, module: &[String]) -> Vec<String> {
    let mut rooms = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if starts_word && rest.starts_with("crate::") {
            let name: String = rest["crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rooms.push(name);
            i += "crate::".len();
        } else if starts_word && rest.starts_with("super::") {
            let mut ups = 0;
            let mut tail = rest;
            while let Some(t) = tail.strip_prefix("super::") {
                ups += 1;
                tail = t;
            }
            // `super` from a module's own file refers to its parent, so enough of them reach
            // the crate and the next segment names a room. Inline modules (`mod tests`) add a
            // level the file path does not show; a name that is no room is then an item of
            // this room.
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let is_room = ALLOWED_IMPORTS.iter().any(|(room, _)| *room == name);
            if ups >= module.len() && is_room {
                rooms.push(name);
            } else {
                rooms.push(module[0].clone());
            }
            i += rest.len() - tail.len();
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    rooms
}

#[test]
fn rooms_import_only_what_the_layering_allows() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED_IMPORTS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(src_dir()).unwrap();
        if ROOTS.iter().any(|root| relative == Path::new(root)) {
            continue;
        }
        let module = module_path(file);
        let room = &module[0];
        let Some(may_import) = allowed.get(room.as_str()) else {
            violations.push(format!(
                "src/{}: room `{room}` has no row in ALLOWED_IMPORTS",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for target in imported_rooms(line, &module) {
                if target != *room && !may_import.contains(&target.as_str()) {
                    violations.push(format!(
                        "src/{}:{}: `{room}` imports `{target}`: {}",
                        relative.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_resolver_sees_crate_and_super_paths() {
    let net_file = vec!["net".to_string(), "listener".to_string()];
    assert_eq!(
        imported_rooms("use crate::broker::controller::X;", &net_file),
        ["broker"]
    );
    assert_eq!(
        imported_rooms("use super::runtime::Worker;", &net_file),
        ["net"]
    );
    assert_eq!(
        imported_rooms("use super::super::broker::x;", &net_file),
        ["broker"]
    );
    // `notcrate::` is not a path of ours.
    assert!(imported_rooms("let notcrate::x = 1;", &net_file).is_empty());
    let room_root = vec!["net".to_string()];
    assert_eq!(
        imported_rooms("use super::store::X;", &room_root),
        ["store"]
    );
}
