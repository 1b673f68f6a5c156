//! `ringmq admin -n ADDR VERB`: mqadmin's verbs and flag letters over the same request codes,
//! so it works against any RocketMQ name server and broker (Java's included). Headers go in
//! JSON, which every RocketMQ server accepts.
//!
//! Each verb prints a report like mqadmin's (or, with `--json`, one JSON document) and exits 0;
//! on a failure it prints the reason to stderr (a server's refusal with its code and remark)
//! and exits 1.
//!
//! Files: [`client`] (requests, routes, cluster look-ups), [`output`] (tables, times), one
//! file per family of verbs: [`topic`], [`group`], [`consumer`], [`cluster`], [`message`],
//! [`offset`]. The tool speaks remoting through `net`'s blocking client and imports no broker
//! code; it decodes the messages it prints with the store's record format.

pub mod client;
pub mod cluster;
pub mod consumer;
pub mod error;
pub mod group;
pub mod message;
pub mod offset;
pub mod output;
pub mod topic;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use client::AdminClient;
use error::AdminError;
use output::Report;

/// `ringmq admin`'s options and verb.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// Name server addresses, `ip:port;ip:port` (mqadmin's -n).
    #[arg(short = 'n', long = "namesrvAddr", env = "NAMESRV_ADDR", global = true)]
    pub namesrv: Option<String>,
    /// Print one JSON document instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Timeout of each request, in milliseconds.
    #[arg(long = "timeoutMillis", default_value_t = 5000, global = true)]
    pub timeout_ms: u64,
    #[command(subcommand)]
    pub verb: Verb,
}

/// mqadmin's verbs, by their names.
#[derive(Subcommand, Debug)]
#[command(rename_all = "camelCase")]
pub enum Verb {
    /// Create or update a topic on a broker or on every master of a cluster.
    UpdateTopic(topic::UpdateTopicArgs),
    /// Delete a topic from a cluster's masters and from the name servers.
    DeleteTopic(topic::DeleteTopicArgs),
    /// List the topics the name servers know.
    TopicList,
    /// Print a topic's route.
    TopicRoute(topic::TopicArg),
    /// Print the min/max offset and last update of each queue of a topic.
    TopicStatus(topic::TopicArg),
    /// Create or update a subscription group.
    UpdateSubGroup(group::UpdateSubGroupArgs),
    /// Delete a subscription group.
    DeleteSubGroup(group::DeleteSubGroupArgs),
    /// Per queue: broker offset, consumer offset, lag and last consume time of a group.
    ConsumerProgress(consumer::ConsumerProgressArgs),
    /// The clients and subscriptions of an online consumer group.
    ConsumerConnection(consumer::ConsumerConnectionArgs),
    /// The clients of a producer group.
    ProducerConnection(consumer::ProducerConnectionArgs),
    /// Every broker of every cluster with its runtime figures.
    ClusterList(cluster::ClusterListArgs),
    /// Every runtime key a broker reports (GET_BROKER_RUNTIME_INFO).
    BrokerStatus(cluster::BrokerOrClusterArgs),
    /// A broker's configuration.
    GetBrokerConfig(cluster::BrokerOrClusterArgs),
    /// Change one setting of a broker at run time.
    UpdateBrokerConfig(cluster::UpdateBrokerConfigArgs),
    /// Print the messages of a topic.
    PrintMsg(message::PrintMsgArgs),
    /// Print messages by offset message id.
    QueryMsgById(message::QueryMsgByIdArgs),
    /// Find messages by key (QUERY_MESSAGE).
    QueryMsgByKey(message::QueryMsgByKeyArgs),
    /// Move a group's offsets of a topic to a point in time.
    ResetOffsetByTime(offset::ResetOffsetArgs),
}

fn run_verb(admin: &AdminClient, verb: &Verb) -> Result<Report, AdminError> {
    match verb {
        Verb::UpdateTopic(a) => topic::update_topic(admin, a),
        Verb::DeleteTopic(a) => topic::delete_topic(admin, a),
        Verb::TopicList => topic::topic_list(admin),
        Verb::TopicRoute(a) => topic::topic_route(admin, a),
        Verb::TopicStatus(a) => topic::topic_status(admin, a),
        Verb::UpdateSubGroup(a) => group::update_sub_group(admin, a),
        Verb::DeleteSubGroup(a) => group::delete_sub_group(admin, a),
        Verb::ConsumerProgress(a) => consumer::consumer_progress(admin, a),
        Verb::ConsumerConnection(a) => consumer::consumer_connection_report(admin, a),
        Verb::ProducerConnection(a) => consumer::producer_connection(admin, a),
        Verb::ClusterList(a) => cluster::cluster_list(admin, a),
        Verb::BrokerStatus(a) => cluster::broker_status(admin, a),
        Verb::GetBrokerConfig(a) => cluster::get_broker_config(admin, a),
        Verb::UpdateBrokerConfig(a) => cluster::update_broker_config(admin, a),
        Verb::PrintMsg(a) => message::print_msg(admin, a),
        Verb::QueryMsgById(a) => message::query_msg_by_id(admin, a),
        Verb::QueryMsgByKey(a) => message::query_msg_by_key(admin, a),
        Verb::ResetOffsetByTime(a) => offset::reset_offset_by_time(admin, a),
    }
}

/// Runs one verb: prints its report to stdout, or the failure to stderr and exits 1.
pub fn run(args: &AdminArgs) -> ExitCode {
    let admin = AdminClient::new(
        args.namesrv.as_deref(),
        Duration::from_millis(args.timeout_ms),
    );
    match run_verb(&admin, &args.verb) {
        Ok(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report.json).unwrap_or_default()
                );
            } else {
                print!("{}", report.text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringmq admin: {e}");
            ExitCode::from(1)
        }
    }
}
