//! Each cross-shard call paired with its reply type, in one table.
//!
//! A caller writes `shard.ask(target, ListOffset { .. })` and gets the
//! call's own reply type back (`OffsetFound`), so a wrong pairing is a
//! compile error, not a run-time surprise. Glommio's channel mesh carries one
//! message type, so on the wire the calls travel as [`ShardRequest`] and
//! the replies as [`ShardResponse`]; the `cross_shard_calls!` table below
//! generates both enums from the same rows, and is the only code that turns
//! one back into a typed reply.

use std::{future::Future, rc::Rc};

use kafka_protocol::messages::{
    DeleteGroupsResponse, DescribeGroupsResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse,
    OffsetDeleteResponse, SyncGroupResponse, TxnOffsetCommitResponse,
};

use crate::{
    groups::{
        CommitOffsets, CommitTxnOffsets, DeleteGroups, DeleteOffsets, DescribeGroups, FetchOffsets, FetchedOffset,
        Heartbeat, JoinGroup, LeaveGroup, ListGroups, ListedGroup, SyncGroup,
    },
    metrics::snapshot::ShardSnapshot,
    protocol::errors::ErrorCode,
    shard::{
        acl_admin::{AclsChanged, ApplyAcls, ChangeAcls},
        credentials_admin::{AlterCredentials, ApplyCredentials, UserOutcome},
        elections::ElectLeaders,
        messages::{
            AllocateProducerId, AlterConfigs, ApplyTopics, CreatePartitions, CreateTopics, DeleteRecords, DeleteTopics,
            EpochEnd, ListOffset, MarkerWritten, Metrics, OffsetFound, OffsetListed, OpenFailure, Produce, Produced,
            ProducerIdError, Read, ReadOutcome, TopicOutcome, WaitForData, WriteTxnMarkers,
        },
        nearest_replica::ApplyRacks,
        reassignments::Reassign,
        Shard,
    },
    txn::{AddTxnPartitions, DescribeTxns, EndTxn, InitTxnProducer, ListTxns, ListedTxn, TxnDescription, TxnProducer},
};

/// A call one shard makes on another (or on itself, as a plain call), and
/// what it answers.
pub trait CrossShard: Sized + Send + 'static {
    type Reply: Send + 'static;
    /// Counted in the cross-shard traffic metrics. A scrape's own `Metrics`
    /// calls are not: they would change the figures they are collecting.
    const COUNTED: bool;
    /// Runs the call on the shard that owns what it names.
    fn serve(self, shard: &Rc<Shard>) -> impl Future<Output = Self::Reply>;
    /// Transport only: the call as the mesh carries it.
    fn into_request(self) -> ShardRequest;
    /// Transport only: the reply out of the mesh's answer to this call.
    fn reply_of(response: ShardResponse) -> Self::Reply;
}

/// The owner shard is gone (the broker is shutting down): each caller
/// answers its client with a retriable error instead of failing the
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// A call on its way to another shard, plus the way back.
pub struct Envelope {
    pub(super) request: ShardRequest,
    pub(super) reply: futures_channel::oneshot::Sender<ShardResponse>,
}

/// Each row: `Call -> Reply = |shard, call| future`, the future being what
/// the owner shard runs; `, uncounted` keeps the call out of the
/// cross-shard metrics. From the rows come the two transport enums (one
/// variant per call, named as the call), `CrossShard` for each call, and
/// `ShardRequest::serve`, which answers each request variant with the
/// response variant of the same name: that is why `reply_of` can treat any
/// other variant as a broken invariant.
macro_rules! cross_shard_calls {
    ($($call:ident -> $reply:ty = |$shard:ident, $args:pat_param| $serve:expr $(, $flag:ident)?;)*) => {
        /// Every call, as the mesh carries it.
        #[derive(Debug)]
        pub enum ShardRequest {
            $($call($call),)*
        }

        /// Every reply, as the mesh carries it; each variant answers the
        /// request variant of the same name.
        #[derive(Debug)]
        pub enum ShardResponse {
            $($call($reply),)*
        }

        impl ShardRequest {
            pub(super) fn counted(&self) -> bool {
                match self {
                    $(Self::$call(_) => <$call as CrossShard>::COUNTED,)*
                }
            }

            /// Runs a call that came over the mesh.
            pub(super) async fn serve(self, shard: &Rc<Shard>) -> ShardResponse {
                match self {
                    $(Self::$call(call) => ShardResponse::$call(call.serve(shard).await),)*
                }
            }
        }

        $(
            impl CrossShard for $call {
                type Reply = $reply;
                const COUNTED: bool = cross_shard_calls!(@counted $($flag)?);

                fn serve(self, $shard: &Rc<Shard>) -> impl Future<Output = $reply> {
                    let $args = self;
                    $serve
                }

                fn into_request(self) -> ShardRequest {
                    ShardRequest::$call(self)
                }

                fn reply_of(response: ShardResponse) -> $reply {
                    match response {
                        ShardResponse::$call(reply) => reply,
                        _ => unreachable!(
                            "a {} call got another call's reply: ShardRequest::serve answers each with its own",
                            stringify!($call)
                        ),
                    }
                }
            }
        )*
    };
    (@counted) => { true };
    (@counted uncounted) => { false };
}

cross_shard_calls! {
    Produce -> Produced = |shard, call| shard.produce_local(call);
    Read -> Vec<ReadOutcome> = |shard, Read { items, max_bytes, read_committed, replica, client_rack }| {
        shard.read_local(items, max_bytes, read_committed, replica, client_rack)
    };
    WaitForData -> () = |shard, WaitForData { items, wait_ms, read_committed, replica }| {
        shard.wait_for_data(items, wait_ms, read_committed, replica)
    };
    ListOffset -> OffsetListed = |shard, call| shard.list_offset_local(call);
    EpochEnd -> (ErrorCode, i32, i64) = |shard, EpochEnd { topic, partition, epoch }| {
        std::future::ready(shard.epoch_end_local(&topic, partition, epoch))
    };
    DeleteRecords -> OffsetFound = |shard, call| shard.delete_records_local(call);
    CreateTopics -> Vec<TopicOutcome> =
        |shard, CreateTopics { topics, validate_only }| shard.create_topics(topics, validate_only);
    CreatePartitions -> Vec<TopicOutcome> =
        |shard, CreatePartitions { topics, validate_only }| shard.create_partitions(topics, validate_only);
    AlterConfigs -> Vec<TopicOutcome> =
        |shard, AlterConfigs { changes, validate_only }| shard.alter_configs(changes, validate_only);
    DeleteTopics -> Vec<TopicOutcome> = |shard, DeleteTopics { names }| shard.delete_topics(names);
    ApplyTopics -> Vec<OpenFailure> = |shard, ApplyTopics { table }| shard.apply_topics(table);
    ElectLeaders -> Result<Vec<crate::controller::PartitionOutcome>, String> = |shard, call| shard.elect_leaders(call);
    Reassign -> Result<Vec<crate::controller::PartitionOutcome>, String> = |shard, call| shard.reassign_partitions(call);
    // To a group's coordinator shard.
    // A call for one group is None when this shard does not coordinate it
    // (its offsets partition is led elsewhere now); calls wait while the
    // shard loads groups whose leadership came here (`coordinator_leadership`).
    JoinGroup -> Option<JoinGroupResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.join(call)).await }
    };
    SyncGroup -> Option<SyncGroupResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.sync(call)).await }
    };
    Heartbeat -> Option<i16> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.heartbeat(call)).await }
    };
    LeaveGroup -> Option<LeaveGroupResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.leave(call)).await }
    };
    CommitOffsets -> Option<OffsetCommitResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.commit(call)).await }
    };
    FetchOffsets -> Option<Vec<FetchedOffset>> = |shard, call| {
        let group = call.group.clone();
        async move { shard.for_group(&group, shard.groups.fetch_offsets(call)).await }
    };
    DescribeGroups -> DescribeGroupsResponse = |shard, call| async move {
        shard.groups_ready().await;
        shard.groups.describe(call).await
    };
    ListGroups -> Vec<ListedGroup> = |shard, call| async move {
        shard.groups_ready().await;
        shard.groups.list(call).await
    };
    DeleteGroups -> DeleteGroupsResponse = |shard, call| async move {
        shard.groups_ready().await;
        shard.groups.delete_groups(call).await
    };
    DeleteOffsets -> Option<OffsetDeleteResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.delete_offsets(call)).await }
    };
    CommitTxnOffsets -> Option<TxnOffsetCommitResponse> = |shard, call| {
        let group = call.request.group_id.to_string();
        async move { shard.for_group(&group, shard.groups.commit_txn(call)).await }
    };
    // To a transactional id's coordinator shard.
    // As for groups: None when this shard does not coordinate the id.
    InitTxnProducer -> Option<TxnProducer> = |shard, call| {
        let id = call.transactional_id.clone();
        async move { shard.for_txn(&id, shard.txn.init_producer(call)).await }
    };
    AddTxnPartitions -> Option<Vec<(String, i32, ErrorCode)>> = |shard, call| {
        let id = call.transactional_id.clone();
        async move { shard.for_txn(&id, shard.txn.add_partitions(call)).await }
    };
    EndTxn -> Option<ErrorCode> = |shard, call| {
        let id = call.transactional_id.clone();
        async move { shard.for_txn(&id, shard.txn.end(call)).await }
    };
    DescribeTxns -> Vec<TxnDescription> = |shard, call| async move {
        shard.txns_ready().await;
        shard.txn.describe(call)
    };
    ListTxns -> Vec<ListedTxn> = |shard, call| async move {
        shard.txns_ready().await;
        shard.txn.list(call)
    };
    WriteTxnMarkers -> Vec<MarkerWritten> = |shard, call| shard.write_txn_markers(call);
    AllocateProducerId -> Result<i64, ProducerIdError> = |shard, AllocateProducerId| shard.allocate_producer_id();
    // To the controller, then from it to every shard.
    ChangeAcls -> AclsChanged = |shard, call| shard.apply_acl_change(call);
    ApplyAcls -> () = |shard, ApplyAcls { acls }| {
        shard.set_acls(acls);
        std::future::ready(())
    };
    ApplyRacks -> () = |shard, ApplyRacks { racks }| {
        shard.set_racks(racks);
        std::future::ready(())
    };
    // SCRAM credentials: changed on the controller, then applied everywhere.
    AlterCredentials -> Vec<UserOutcome> = |shard, AlterCredentials { changes }| shard.alter_credentials(changes);
    ApplyCredentials -> () = |shard, ApplyCredentials { credentials }| shard.apply_credentials(credentials);
    Metrics -> Box<ShardSnapshot> =
        |shard, Metrics| std::future::ready(Box::new(shard.metrics_snapshot())), uncounted;
}
