//! Every config file loader, on the real loading path: broker.conf (Java properties, with the
//! field table and validation), and `topics.json`, `subscriptionGroup.json`,
//! `consumerOffset.json`, `delayOffset.json` (each with its `.bak` fallback), the ACL's
//! `plain_acl.yml` (YAML, compiled into rules), the name server's `kvConfig.json`, and a name
//! server's config file. The first input byte picks the file, the rest is its content.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ringmq::acl::validator::PlainAccessValidator;
use ringmq::broker::consumer_offset_manager::ConsumerOffsetManager;
use ringmq::broker::schedule_message_service::load_offsets;
use ringmq::broker::subscription_group_manager::SubscriptionGroupManager;
use ringmq::broker::topic_config_manager::{TopicConfigManager, TopicDefaults};
use ringmq::config::{Config, ConfigInputs, Process};
use ringmq::namesrv::kv_config_manager::KvConfigManager;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap().keep())
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let root = dir().join("store");
    // A fresh directory each run: a corrupt file is moved aside to .corrupt-<ms>.
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("config")).unwrap();
    let config = root.join("config");
    match which % 8 {
        0 => load_config(content, Process::Broker),
        1 => {
            std::fs::write(config.join("topics.json"), content).unwrap();
            let defaults = TopicDefaults {
                cluster_name: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                auto_create_topic_enabled: true,
                default_topic_queue_nums: 8,
            };
            let _ = TopicConfigManager::new(&root, &defaults).load();
        }
        2 => {
            std::fs::write(config.join("subscriptionGroup.json"), content).unwrap();
            let _ = SubscriptionGroupManager::new(&root, true).load();
        }
        3 => {
            std::fs::write(config.join("consumerOffset.json"), content).unwrap();
            let _ = ConsumerOffsetManager::new(&root).load();
        }
        4 => {
            std::fs::write(config.join("delayOffset.json"), content).unwrap();
            let _ = load_offsets(&root);
        }
        5 => {
            let path = dir().join("plain_acl.yml");
            std::fs::write(&path, content).unwrap();
            let _ = PlainAccessValidator::load(&path);
        }
        6 => {
            let path = root.join("kvConfig.json");
            std::fs::write(&path, content).unwrap();
            let _ = KvConfigManager::load(&path);
        }
        _ => load_config(content, Process::Namesrv),
    }
});

fn load_config(content: &[u8], process: Process) {
    let path = dir().join("ringmq.conf");
    std::fs::write(&path, content).unwrap();
    let inputs = ConfigInputs {
        file: Some(path),
        process,
        namesrv_addr: None,
    };
    let _ = Config::load(&inputs, Vec::new());
}
