//! The message index file reader (Java `IndexFile`) on any file image: open (the size check and
//! the header), the key lookup walking hash chains, and the crash repair of the tail. The first
//! input byte picks how the image is sized: as given (exercising the size check), or cut or
//! zero-padded to the size the small dimensions below make, so the walks run on hostile slots
//! and entries.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ringmq::store::fs::RealFs;
use ringmq::store::index_file::{build_index_key, index_file_size_bytes, IndexFile};

const HASH_SLOT_NUM: i32 = 8;
const INDEX_NUM: i32 = 32;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        tempfile::tempdir()
            .unwrap()
            .keep()
            .join("20260101000000000")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, image)) = data.split_first() else {
        return;
    };
    let mut image = image.to_vec();
    if mode % 4 != 0 {
        image.resize(index_file_size_bytes(HASH_SLOT_NUM, INDEX_NUM) as usize, 0);
    }
    std::fs::write(path(), &image).unwrap();
    let Ok(file) = IndexFile::open(RealFs::shared(), path(), HASH_SLOT_NUM, INDEX_NUM) else {
        return;
    };
    let _ = file.header();
    let _ = file.is_write_full();
    let _ = file.is_time_matched(0, i64::MAX);
    for key in ["", "k", "TopicTest#key"] {
        let mut out = Vec::new();
        let _ = file.select_phy_offsets(&mut out, key, 64, i64::MIN, i64::MAX);
        assert!(out.len() <= 64);
        let mut out = Vec::new();
        let _ = file.select_phy_offsets(&mut out, &build_index_key("T", key), 3, 0, i64::MAX);
        assert!(out.len() <= 3);
    }
    if mode % 4 == 2 {
        let _ = file.repair_tail();
        let _ = file.put_key("T#k", 1, 2);
    }
});
